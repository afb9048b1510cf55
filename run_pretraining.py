"""Pretrain BERT (masked LM + next sentence prediction) on TFRecords of create_pretraining_data.py.

One CPU or GPU, N GPUs (--distribution_strategy=mirrored --num_gpus=N), several machines
(--distribution_strategy=multi_worker_mirrored with TF_CONFIG) or a Cloud TPU (--use_tpu --tpu_name=...).
Restarting with the same --output_dir resumes from its latest checkpoint.
"""

import os
import uuid

import keras
import tensorflow as tf
from absl import flags, logging

from bert_tf.checkpoints import restore_init_checkpoint, save_google_checkpoint
from bert_tf.cli import run as run_script
from bert_tf.data.pretraining import make_pretraining_dataset
from bert_tf.distribute import STRATEGIES, get_strategy, is_chief, resolve_strategy_name
from bert_tf.modeling import BertConfig, BertPretrainingModel, pretraining_loss
from bert_tf.optimization import OPTIMIZER_TYPES, create_optimizer
from bert_tf.training import (
    MIXED_PRECISION_POLICIES,
    Task,
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


def pretraining_task(bert_config, input_file, max_seq_length, max_predictions_per_seq, seed=None):
    """The masked-LM + next-sentence Task for bert_tf.training."""

    def loss_fn(outputs, features, normalizers):
        return pretraining_loss(
            outputs,
            features,
            mlm_denominator=normalizers["masked_lm_weight"] + 1e-5,
            nsp_denominator=normalizers["examples"],
        )

    def normalizer_fn(features):
        return {
            "masked_lm_weight": tf.reduce_sum(features["masked_lm_weights"]),
            "examples": tf.cast(tf.shape(features["input_ids"])[0], tf.float32),
        }

    def dataset_fn(input_context, batch_size, is_training):
        # Eval repeats too, as in the original: it always runs --max_eval_steps batches, even over
        # fewer records than that.
        return make_pretraining_dataset(
            input_file, batch_size, max_seq_length, max_predictions_per_seq, is_training,
            input_context=input_context, seed=seed, repeat=True,
        )  # fmt: skip

    return Task(
        build_model=lambda: BertPretrainingModel(bert_config),
        loss_fn=loss_fn,
        normalizer_fn=normalizer_fn,
        metric_fn=pretraining_metrics,
        dataset_fn=dataset_fn,
    )


def pretraining_metrics(outputs, features):
    """The original metric_fn: {name: (values, weights)} for masked-LM and next-sentence accuracy and loss."""
    masked_lm_ids = features["masked_lm_ids"]  # [B, P]
    log_probs = outputs["masked_lm_log_probs"]  # [B, P, V]
    masked_lm_nll = -tf.reduce_sum(
        log_probs * tf.one_hot(masked_lm_ids, tf.shape(log_probs)[-1]), -1
    )
    masked_lm_correct = tf.equal(tf.argmax(log_probs, -1, output_type=tf.int32), masked_lm_ids)
    labels = tf.reshape(features["next_sentence_labels"], [-1])  # [B]
    nsp_log_probs = outputs["next_sentence_log_probs"]  # [B, 2]
    nsp_nll = -tf.reduce_sum(nsp_log_probs * tf.one_hot(labels, 2), -1)
    nsp_correct = tf.equal(tf.argmax(nsp_log_probs, -1, output_type=tf.int32), labels)
    weights = features["masked_lm_weights"]
    ones = tf.ones_like(nsp_nll)
    return {
        "masked_lm_accuracy": (tf.cast(masked_lm_correct, tf.float32), weights),
        "masked_lm_loss": (masked_lm_nll, weights),
        "next_sentence_accuracy": (tf.cast(nsp_correct, tf.float32), ones),
        "next_sentence_loss": (nsp_nll, ones),
    }


def export_google_checkpoint(model, bert_config, output_dir):
    """Writes output_dir/bert_model.ckpt.* + bert_config.json in Google's format, via a temp dir + rename."""
    temp_dir = os.path.join(output_dir, f".export-{uuid.uuid4().hex}")
    tf.io.gfile.makedirs(temp_dir)
    save_google_checkpoint(model, os.path.join(temp_dir, "bert_model.ckpt"))
    with tf.io.gfile.GFile(os.path.join(temp_dir, "bert_config.json"), "w") as f:
        f.write(bert_config.to_json_string())
    for name in tf.io.gfile.listdir(temp_dir):
        # A TF1 Saver also writes a "checkpoint" state file: it must not replace the training one.
        if name.startswith(("bert_model.ckpt.", "bert_config.json")):
            target = os.path.join(output_dir, name)
            tf.io.gfile.rename(os.path.join(temp_dir, name), target, overwrite=True)
    tf.io.gfile.rmtree(temp_dir)
    logging.info("Wrote Google-format checkpoint %s", os.path.join(output_dir, "bert_model.ckpt"))


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
    if FLAGS.do_train:
        trainer.train()
        if chief:
            export_google_checkpoint(trainer.model, bert_config, FLAGS.output_dir)
    if FLAGS.do_eval:
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
