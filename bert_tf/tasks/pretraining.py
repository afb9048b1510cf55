"""Masked-LM + next-sentence pretraining: run_pretraining.py's settings, its Trainable and its run.

--objective (bert_tf.objectives) picks the paper's ablations: "mlm" drops the next-sentence loss and
head; "ltr" trains a causal encoder to predict every next token (the loss over each real position's
next token, the cls/predictions head tied to the word embeddings), on records of
create_pretraining_data.py --objective=ltr (one segment, nothing masked).

B = batch, S = sequence length, P = max_predictions_per_seq, V = vocabulary size.
"""

import dataclasses
import math

import tensorflow as tf
from absl import logging

from bert_tf import file_io
from bert_tf.checkpoints import export_google_checkpoint
from bert_tf.data.pretraining.masking import MaskingOptions
from bert_tf.data.pretraining.reader import check_records, make_pretraining_dataset
from bert_tf.data.pretraining.record_objective import file_objective
from bert_tf.data.records import reading_records
from bert_tf.errors import InputError
from bert_tf.modeling import BertPretrainingModel, pretraining_loss
from bert_tf.models.networks.task_info import TaskInfo, write_task_info
from bert_tf.optimization import OPTIMIZER_TYPES, create_optimizer
from bert_tf.settings import restated, setting
from bert_tf.shared_settings import DynamicMaskingSetting, ObjectiveSetting, RunSettings
from bert_tf.sigterm import doing
from bert_tf.tasks.run import Run
from bert_tf.tasks.run_settings import check_learning_rates
from bert_tf.training import Trainable
from bert_tf.training.evaluation import evaluate

MODEL_TYPE = "pretraining"


def pretraining_trainable(
    bert_config, input_file, max_seq_length, max_predictions_per_seq, seed=None, masking=None
):
    """What pretraining trains (a bert_tf.training.Trainable), reading create_pretraining_data TFRecords: masked LM +
    next sentence, masked LM alone or next-token LM, as bert_config.objective says; with `masking` (a
    masking.MaskingOptions), unmasked records masked as they are read (--dynamic_masking)."""

    def loss_fn(outputs, features, normalizers):
        if bert_config.objective == "ltr":
            return next_token_loss(outputs, features, normalizers["next_token_weight"] + 1e-5)
        return pretraining_loss(
            outputs,
            features,
            mlm_denominator=normalizers["masked_lm_weight"] + 1e-5,
            nsp_denominator=normalizers["examples"],
        )

    def normalizer_fn(features):
        return {
            "masked_lm_weight": tf.reduce_sum(features["masked_lm_weights"]),
            "next_token_weight": tf.reduce_sum(_next_token_weights(features)),
            "examples": tf.cast(tf.shape(features["input_ids"])[0], tf.float32),
        }

    def dataset_fn(input_context, batch_size, is_training):
        # Eval repeats too, as in the original: it always runs --max_eval_steps batches, even over
        # fewer records than that.
        return make_pretraining_dataset(
            input_file, batch_size, max_seq_length, max_predictions_per_seq, is_training,
            input_context=input_context, seed=seed, repeat=True, masking=masking,
        )  # fmt: skip

    return Trainable(
        build_model=lambda: BertPretrainingModel(bert_config),
        loss_fn=loss_fn,
        normalizer_fn=normalizer_fn,
        metric_fn=next_token_metrics if bert_config.objective == "ltr" else pretraining_metrics,
        dataset_fn=dataset_fn,
    )


def _next_token_weights(features):
    """[B, S - 1] float32: 1 where position i + 1 holds a real token (the target of position i)."""
    return tf.cast(features["input_mask"], tf.float32)[:, 1:]


def _next_token_nll(outputs, features):
    """[B, S - 1] float32: -log p(token i + 1 | tokens <= i) for each position i < S - 1."""
    labels = tf.cast(features["input_ids"], tf.int32)[:, 1:]
    logits = tf.cast(outputs["next_token_logits"], tf.float32)  # [B, S-1, V]
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)


def next_token_loss(outputs, features, denominator=None):
    """The left-to-right LM loss (objective ltr): the mean NLL of every real position's next token.

    Args:
      outputs: BertPretrainingModel outputs of an "ltr" config: "next_token_logits" [B, S - 1, V].
      features: "input_ids", "input_mask" [B, S] int.
      denominator: divides the weighted NLL sum; default the number of predicted tokens + 1e-5
        (distributed training passes the global count).

    Returns:
      A dict of float32 scalars "loss" and "next_token_loss" (the same value).
    """
    weights = _next_token_weights(features)
    if denominator is None:
        denominator = tf.reduce_sum(weights) + 1e-5
    loss = tf.reduce_sum(weights * _next_token_nll(outputs, features)) / denominator
    return {"loss": loss, "next_token_loss": loss}


def next_token_metrics(outputs, features):
    """{name: (values, weights)}: next-token accuracy and loss over the real positions (objective ltr)."""
    labels = tf.cast(features["input_ids"], tf.int32)[:, 1:]
    predicted = tf.argmax(outputs["next_token_logits"], -1, output_type=tf.int32)
    weights = _next_token_weights(features)
    return {
        "next_token_accuracy": (tf.cast(tf.equal(predicted, labels), tf.float32), weights),
        "next_token_loss": (_next_token_nll(outputs, features), weights),
    }


def pretraining_metrics(outputs, features):
    """The original metric_fn: {name: (values, weights)} for masked-LM and next-sentence accuracy and loss
    (masked LM alone when the model has no next-sentence head, objective mlm)."""
    masked_lm_ids = features["masked_lm_ids"]  # [B, P]
    log_probs = outputs["masked_lm_log_probs"]  # [B, P, V]
    masked_lm_nll = -tf.reduce_sum(
        log_probs * tf.one_hot(masked_lm_ids, tf.shape(log_probs)[-1]), -1
    )
    masked_lm_correct = tf.equal(tf.argmax(log_probs, -1, output_type=tf.int32), masked_lm_ids)
    weights = features["masked_lm_weights"]
    masked_lm = {
        "masked_lm_accuracy": (tf.cast(masked_lm_correct, tf.float32), weights),
        "masked_lm_loss": (masked_lm_nll, weights),
    }
    if "next_sentence_log_probs" not in outputs:
        return masked_lm
    labels = tf.reshape(features["next_sentence_labels"], [-1])  # [B]
    nsp_log_probs = outputs["next_sentence_log_probs"]  # [B, 2]
    nsp_nll = -tf.reduce_sum(nsp_log_probs * tf.one_hot(labels, 2), -1)
    nsp_correct = tf.equal(tf.argmax(nsp_log_probs, -1, output_type=tf.int32), labels)
    ones = tf.ones_like(nsp_nll)
    return {
        **masked_lm,
        "next_sentence_accuracy": (tf.cast(nsp_correct, tf.float32), ones),
        "next_sentence_loss": (nsp_nll, ones),
    }


@dataclasses.dataclass(kw_only=True)
class PretrainingSettings(RunSettings, ObjectiveSetting, DynamicMaskingSetting):
    """run_pretraining.py's settings: the original's flags, and the TF2 ones every run shares."""

    input_file: str | None = setting(
        None, "Comma-separated TFRecord files or globs (create_pretraining_data.py)."
    )
    max_seq_length: int = restated(
        RunSettings, "max_seq_length", help="Sequence length S the TFRecords were written with."
    )
    max_predictions_per_seq: int = setting(20, "Masked positions P per sequence in the TFRecords.")
    do_eval: bool = restated(
        RunSettings, "do_eval", help="Evaluate on --input_file after training."
    )
    num_train_steps: int = setting(
        100000, "Optimizer updates in all (the run stops at this global step)."
    )
    num_warmup_steps: int = setting(10000, "Steps of linear learning-rate warmup from 0.")
    max_eval_steps: int = setting(100, "Eval batches; the eval input repeats, as in the original.")
    num_accumulation_steps: int = setting(
        1, "Micro-batches per update; train_batch_size is split into them."
    )
    optimizer: str = setting("adamw", "adamw (the original's) or lamb.", choices=OPTIMIZER_TYPES)
    masked_lm_prob: float = setting(
        0.15, "With --dynamic_masking: the fraction of tokens to predict. Default 0.15."
    )
    do_whole_word_mask: bool = setting(
        False,
        "With --dynamic_masking: mask whole words (a word and its ## pieces together). Default False.",
    )

    positive = (*RunSettings.positive, "max_predictions_per_seq", "max_eval_steps")
    positive += ("num_accumulation_steps",)

    def check(self):
        super().check()
        check_learning_rates(self)
        if not (self.do_train or self.do_eval):
            raise InputError("At least one of --do_train or --do_eval must be True")
        if not self.input_file:
            raise InputError("--input_file is required")
        if self.num_train_steps <= 0 and self.do_train:
            raise InputError(f"--num_train_steps must be positive, got {self.num_train_steps}")
        if self.num_warmup_steps < 0:
            raise InputError(f"--num_warmup_steps must be >= 0, got {self.num_warmup_steps}")
        if not 0.0 <= self.masked_lm_prob <= 1.0:
            raise InputError(f"--masked_lm_prob must be in [0, 1], got {self.masked_lm_prob}")
        if self.dynamic_masking and self.objective == "ltr":
            raise InputError(
                "--dynamic_masking applies to the masked-LM objectives (mlm_nsp, mlm), not "
                "--objective=ltr, which masks nothing"
            )

    def masking(self):
        """The MaskingOptions of --dynamic_masking (keyed on --seed, 0 when none), or None."""
        if not self.dynamic_masking:
            return None
        return MaskingOptions(
            max_predictions_per_seq=self.max_predictions_per_seq,
            masked_lm_prob=self.masked_lm_prob,
            do_whole_word_mask=self.do_whole_word_mask,
            seed=0 if self.seed is None else self.seed,
        )


class PretrainingRun(Run):
    """One run_pretraining.py invocation: checks, training, the Google-format export, evaluation."""

    @property
    def num_accumulation_steps(self):
        return self.settings.num_accumulation_steps

    @property
    def objective(self):
        return self.settings.objective

    def __init__(self, settings):
        super().__init__(settings)
        self.input_files = file_io.expand_globs(settings.input_file, "--input_file")
        check_records(
            self.input_files,
            settings.max_seq_length,
            settings.max_predictions_per_seq,
            self.bert_config.vocab_size,
            f"--bert_config_file={settings.bert_config_file}",
            dynamic=settings.dynamic_masking,
        )
        written = file_objective(self.input_files[0])
        if written is not None and written != settings.objective:
            raise InputError(
                f"--objective={settings.objective}, but --input_file {self.input_files[0]} holds "
                f"records of create_pretraining_data.py --objective={written}: write them with "
                f"--objective={settings.objective}"
            )

    def build_model(self):
        return BertPretrainingModel(self.bert_config)

    def trainer(self):
        """The Trainer (built on first use, resuming from output_dir's latest checkpoint)."""
        if self._trainer is None:
            settings = self.settings
            trainable = pretraining_trainable(
                self.bert_config,
                self.input_files,
                settings.max_seq_length,
                settings.max_predictions_per_seq,
                settings.seed,
                settings.masking(),
            )
            self._trainer = self.make_trainer(
                trainable,
                lambda: create_optimizer(
                    settings.learning_rate,
                    settings.num_train_steps,
                    settings.num_warmup_steps,
                    settings.optimizer,
                ),
                self.train_settings(settings.num_train_steps),
            )
        return self._trainer

    def run(self):
        """Trains and/or evaluates as the flags say; returns the Trainer."""
        settings = self.settings
        self.check_init_checkpoint(needs_head=False)
        if not settings.do_train and not settings.init_checkpoint and not self.resumes():
            logging.warning("Evaluating the initial (random) weights: no checkpoint to read")
        if self.is_chief:
            info = TaskInfo(
                model_type=MODEL_TYPE,
                bert_config=self.bert_config,
                max_seq_length=settings.max_seq_length,
            )
            write_task_info(settings.output_dir, info)
        trainer = self.trainer()
        if settings.do_train:
            with reading_records(self.input_files):
                trainer.train()
            if self.is_chief:
                export_google_checkpoint(trainer.model, self.bert_config, settings.output_dir)
        if settings.do_eval:
            self.write_eval_results(self.evaluate(trainer))
        return trainer

    def evaluate(self, trainer):
        """--do_eval: the loss and metrics of --max_eval_steps batches of --input_file (the input
        repeats, as in the original), the masked-LM (next-token) perplexity and the global step."""
        with reading_records(self.input_files), doing("evaluation"):
            results = evaluate(
                trainer.trainable,
                trainer.model,
                trainer.strategy,
                self.settings.eval_batch_size,
                self.settings.max_eval_steps,
            )
        results["global_step"] = trainer.global_step
        # The paper's Table 6 reports it: exp of the weighted mean masked-LM (next-token) loss.
        for kind in ("masked_lm", "next_token"):
            if f"{kind}_loss" in results:
                results[f"{kind}_perplexity"] = math.exp(results[f"{kind}_loss"])
        return results
