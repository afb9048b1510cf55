"""Pretrain BERT (masked LM + next sentence prediction) on TFRecords of create_pretraining_data.py.

One CPU or GPU, N GPUs (--distribution_strategy=mirrored --num_gpus=N), several machines
(--distribution_strategy=multi_worker_mirrored with TF_CONFIG) or a Cloud TPU (--use_tpu --tpu_name=...).
Restarting with the same --output_dir resumes from its latest checkpoint.
"""

import os

import keras
import tensorflow as tf
from absl import flags, logging

from bert_tf.checkpoints import export_google_checkpoint, restore_init_checkpoint
from bert_tf.cli import run as run_script
from bert_tf.data.records import reading_records
from bert_tf.io import expand_globs
from bert_tf.distribute import STRATEGIES, get_strategy, is_chief, resolve_strategy_name
from bert_tf.modeling import BertConfig
from bert_tf.optimization import OPTIMIZER_TYPES, create_optimizer
from bert_tf.tasks.pretraining import pretraining_task
from bert_tf.training import (
    MIXED_PRECISION_POLICIES,
    TrainConfig,
    Trainer,
    write_eval_results,
)

FLAGS = flags.FLAGS

# The original's flags, names and defaults.
flags.DEFINE_string("bert_config_file", None, "bert_config.json of the model to pretrain.")
flags.DEFINE_string(
    "input_file", None, "Comma-separated TFRecord files or globs (create_pretraining_data.py)."
)
flags.DEFINE_string(
    "output_dir", None, "Checkpoints, TensorBoard summaries, eval_results.txt and the export."
)
flags.DEFINE_string(
    "init_checkpoint", None, "Initial weights: a Google release checkpoint or one of ours."
)
flags.DEFINE_integer("max_seq_length", 128, "Sequence length S the TFRecords were written with.")
flags.DEFINE_integer(
    "max_predictions_per_seq", 20, "Masked positions P per sequence in the TFRecords."
)
flags.DEFINE_bool("do_train", False, "Train.")
flags.DEFINE_bool("do_eval", False, "Evaluate on --input_file after training.")
flags.DEFINE_integer("train_batch_size", 32, "Global batch per optimizer update (all replicas).")
flags.DEFINE_integer("eval_batch_size", 8, "Global eval batch (all replicas).")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate of the warmup + linear decay.")
flags.DEFINE_integer(
    "num_train_steps", 100000, "Optimizer updates in all (the run stops at this global step)."
)
flags.DEFINE_integer("num_warmup_steps", 10000, "Steps of linear learning-rate warmup from 0.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Steps between checkpoints.")
flags.DEFINE_integer(
    "iterations_per_loop", 1000, "Steps run in one tf.function call (host round trip)."
)
flags.DEFINE_integer(
    "max_eval_steps", 100, "Eval batches; the eval input repeats, as in the original."
)
flags.DEFINE_bool("use_tpu", False, "Run on a Cloud TPU (same as --distribution_strategy=tpu).")
flags.DEFINE_string("tpu_name", None, "TPU name or grpc:// address (TPUClusterResolver).")
flags.DEFINE_string("tpu_zone", None, "GCE zone of the TPU (looked up from metadata if unset).")
flags.DEFINE_string(
    "gcp_project", None, "GCP project of the TPU (looked up from metadata if unset)."
)
flags.DEFINE_string("master", None, "TPU address; used when --tpu_name is unset.")
flags.DEFINE_integer("num_tpu_cores", 8, "TPU cores; checked against the TPU found.")

# What TF2 users need besides.
flags.DEFINE_enum("distribution_strategy", "one_device", STRATEGIES, "tf.distribute strategy.")
flags.DEFINE_integer("num_gpus", 0, "GPUs for one_device / mirrored; 0 = CPU.")
flags.DEFINE_enum(
    "mixed_precision",
    "float32",
    MIXED_PRECISION_POLICIES,
    "Keras dtype policy; mixed_float16 uses dynamic loss scaling.",
)
flags.DEFINE_bool("jit_compile", False, "Compile the forward and backward pass with XLA.")
flags.DEFINE_integer(
    "num_accumulation_steps", 1, "Micro-batches per update; train_batch_size is split into them."
)
flags.DEFINE_enum("optimizer", "adamw", OPTIMIZER_TYPES, "adamw (the original's) or lamb.")
flags.DEFINE_integer("seed", 12345, "Seed of weights init, dropout and input shuffling.")
flags.DEFINE_integer("log_steps", 100, "Steps between progress lines and TensorBoard summaries.")


def _check_flags():
    if not FLAGS.do_train and not FLAGS.do_eval:
        raise ValueError("At least one of --do_train or --do_eval must be True")
    for name in ("bert_config_file", "input_file", "output_dir"):
        if not FLAGS[name].value:
            raise ValueError(f"--{name} is required")
    if not tf.io.gfile.exists(FLAGS.bert_config_file):
        raise FileNotFoundError(f"--bert_config_file={FLAGS.bert_config_file} does not exist")
    for name in (
        "max_seq_length",
        "max_predictions_per_seq",
        "iterations_per_loop",
        "max_eval_steps",
    ):
        if FLAGS[name].value <= 0:
            raise ValueError(f"--{name} must be positive, got {FLAGS[name].value}")


def run_from_flags():
    """Pretrains and/or evaluates as the flags say; returns the Trainer."""
    _check_flags()
    bert_config = BertConfig.from_json_file(FLAGS.bert_config_file)
    if FLAGS.max_seq_length > bert_config.max_position_embeddings:
        raise ValueError(
            f"--max_seq_length={FLAGS.max_seq_length} exceeds max_position_embeddings="
            f"{bert_config.max_position_embeddings} of --bert_config_file={FLAGS.bert_config_file}"
        )
    tf.io.gfile.makedirs(FLAGS.output_dir)
    if FLAGS.seed is not None:
        keras.utils.set_random_seed(FLAGS.seed)
    strategy = get_strategy(
        resolve_strategy_name(FLAGS.distribution_strategy, FLAGS.use_tpu),
        num_gpus=FLAGS.num_gpus,
        tpu_name=FLAGS.tpu_name or FLAGS.master,
        tpu_zone=FLAGS.tpu_zone,
        gcp_project=FLAGS.gcp_project,
        num_tpu_cores=FLAGS.num_tpu_cores if FLAGS.use_tpu else None,
    )
    logging.info(
        "Strategy %s with %d replica(s)", type(strategy).__name__, strategy.num_replicas_in_sync
    )
    task = pretraining_task(
        bert_config,
        FLAGS.input_file,
        FLAGS.max_seq_length,
        FLAGS.max_predictions_per_seq,
        FLAGS.seed,
    )
    config = TrainConfig(
        model_dir=FLAGS.output_dir,
        train_batch_size=FLAGS.train_batch_size,
        eval_batch_size=FLAGS.eval_batch_size,
        num_train_steps=FLAGS.num_train_steps,
        steps_per_loop=FLAGS.iterations_per_loop,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        log_steps=FLAGS.log_steps,
        num_accumulation_steps=FLAGS.num_accumulation_steps,
        mixed_precision=FLAGS.mixed_precision,
        jit_compile=FLAGS.jit_compile,
    )
    init_checkpoint = FLAGS.init_checkpoint
    trainer = Trainer(
        task,
        strategy,
        lambda: create_optimizer(
            FLAGS.learning_rate, FLAGS.num_train_steps, FLAGS.num_warmup_steps, FLAGS.optimizer
        ),
        config,
        init_fn=(lambda model: restore_init_checkpoint(model, init_checkpoint))
        if init_checkpoint
        else None,
    )
    chief = is_chief(strategy)
    input_files = expand_globs(FLAGS.input_file, "--input_file")
    if FLAGS.do_train:
        with reading_records(input_files):
            trainer.train()
        if chief:
            export_google_checkpoint(trainer.model, bert_config, FLAGS.output_dir)
    if FLAGS.do_eval:
        with reading_records(input_files):
            results = trainer.evaluate(max_steps=FLAGS.max_eval_steps)
        if chief:
            write_eval_results(os.path.join(FLAGS.output_dir, "eval_results.txt"), results)
    return trainer


def main(argv):
    del argv
    run_from_flags()


def cli():
    """Console entry point `bert-run-pretraining`."""
    run_script(main, __name__)


if __name__ == "__main__":
    cli()
