"""THE training loop, shared by every run_*.py: strategy scope, distributed input, train/eval steps, resume.

A run hands the loop a `Trainable`: how to build its model, its loss, its eval metrics and its input. The
loop knows nothing else about it. The `Trainer` (trainer.py) puts together its parts, each tested alone:

- train_settings.py: `Trainable`, `TrainSettings` and `check_batch_sizes`, the one check of the batch sizes;
- bert_tf/training/checkpoint_state.py: what a checkpoint keeps (weights, optimizer, dropout streams, the
  input position) and the resume from it;
- inputs.py: this worker's training input, at the run's position;
- steps.py: the training step (gradient accumulation, XLA) and its loss sums;
- loop.py: the loop (boundaries, SIGTERM, divergence, progress);
- predictor.py: the `Predictor`, the one evaluation design: the model's outputs on the host (every
  real example's in input order, for fine-tuning's metrics and prediction files);
- evaluation.py: `evaluate`, the eval loss and metrics through the Predictor (pretraining's), and
  eval_results.txt.
"""

from bert_tf.training.evaluation import evaluate, write_eval_results
from bert_tf.training.predictor import Predictor
from bert_tf.training.train_settings import Trainable, TrainSettings, check_batch_sizes
from bert_tf.training.trainer import Trainer

__all__ = [
    "Predictor",
    "TrainSettings",
    "Trainable",
    "Trainer",
    "check_batch_sizes",
    "evaluate",
    "write_eval_results",
]
