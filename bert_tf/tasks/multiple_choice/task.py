"""Multiple choice (SWAG): a score per choice from the pooled output, softmax over the choices.

Each choice is packed as `[CLS] context [SEP] start_ending ending [SEP]` (bert_tf/tasks/multiple_choice/swag.py) and
scored by logit = pooled_output @ output_weights^T + output_bias (a BertHead), with output_weights [1, H] and
output_bias [1] under the Google-format names `cls/multiple_choice/output_weights` and
`cls/multiple_choice/output_bias`; the choices' logits go through a softmax. The head does not depend
on the number of choices, so files (and serving requests) may have any number of them.

B = batch, C = choices, S = sequence length, H = hidden size.
"""

import numpy as np
import tensorflow as tf

from bert_tf import file_io, metrics
from bert_tf.data.feature_cache import file_identity
from bert_tf.errors import InputError
from bert_tf.models.networks import multiple_choice_network
from bert_tf.tasks.finetuning import FineTuningRun
from bert_tf.tasks.multiple_choice import swag
from bert_tf.tasks.spec import TaskSpec
from bert_tf.tasks.task_parts import Task
from bert_tf.tasks.task_settings import MultipleChoiceSettings


def multiple_choice_loss(outputs, features, num_examples):
    """Cross-entropy of the right choice, summed / num_examples (the global count)."""
    logits = tf.cast(outputs["logits"], tf.float32)  # [B, C]
    labels = tf.cast(tf.reshape(features["label_ids"], [-1]), tf.int32)  # [B]
    per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)  # [B]
    return tf.reduce_sum(per_example) / num_examples


# ---------------------------------------------------------------------------------- the task


SPEC = TaskSpec.of(multiple_choice_network.NETWORK, settings_class=MultipleChoiceSettings)


class MultipleChoiceTask(Task):
    """run_swag.py's task: a score per choice, the right choice's cross-entropy, its accuracy."""

    spec = SPEC

    # ------------------------------------------------------------------ data

    def read_split(self, split):
        """(path, examples) of a split's file ("train", "dev", "test")."""
        path = file_io.require_split_file(self.settings.data_dir, swag.SWAG_FILE_NAMES, split)
        examples = swag.read_multiple_choice_file(path)
        if split != "test" and examples[0].label is None:
            raise InputError(f"{path}: the {split} file has no labels")
        return path, examples

    def feature_settings(self, step):
        return {
            "format": "bert_tf multiple choice features 1",
            "input": file_identity(self.run.step_data(step)[0]),
        }

    def make_records(self, step):
        examples, max_seq_length = self.run.step_data(step)[1], self.settings.max_seq_length
        serialized = [
            swag.serialize_multiple_choice_feature(
                swag.convert_example_to_multiple_choice_feature(
                    example, max_seq_length, self.tokenizer
                )
            )
            for example in examples
        ]
        return serialized, {
            "num_real_examples": len(examples),
            "num_choices": len(examples[0].endings),
        }

    def feature_summary(self, info):
        return f"{info['num_real_examples']} examples of {info['num_choices']} choices"

    def feature_spec(self, is_training, path=None):
        # The weights do not depend on the number of choices: one choice builds them.
        num_choices = self.run.feature_info(path)["num_choices"] if path else 1
        return swag.multiple_choice_feature_spec(num_choices, self.settings.max_seq_length)

    # ------------------------------------------------------------------ model and loop

    def loss(self, outputs, features, normalizers):
        return {"loss": multiple_choice_loss(outputs, features, normalizers["examples"])}

    # ------------------------------------------------------------------ the steps

    def evaluate(self):
        path, info = self.features("eval")
        result = self.run.predict_features(
            path, info, self.settings.eval_batch_size, ["logits"], ["label_ids"]
        )
        results = evaluation_results(result["logits"], result["label_ids"])
        choices = result["logits"].argmax(axis=-1).tolist()
        return self.run.evaluation_done(results, choices, "choice")

    def predict_test(self):
        path, info = self.features("predict")
        logits = self.run.predict_features(
            path, info, self.settings.predict_batch_size, ["logits"]
        )["logits"]
        probabilities = metrics.softmax(logits)
        rows = ("\t".join(f"{p:.6f}" for p in row) + "\n" for row in probabilities)
        self.run.write_output("test_results.tsv", "".join(rows))
        path, examples = self.run.step_data("predict")
        if any(example.label is None for example in examples):
            self.run.no_test_labels(path)
        else:
            results = evaluation_results(logits, [example.label for example in examples])
            results["global_step"] = self.run.trainer().global_step
            self.run.write_test_results(results, path)
        return probabilities


def evaluation_results(logits, label_ids):
    """eval_results.txt's values: eval_accuracy and eval_loss (mean cross-entropy), loss as well."""
    labels = np.asarray(label_ids).reshape(-1).astype(np.int64)
    log_probs = metrics.log_softmax(logits)
    loss = float(-np.mean(log_probs[np.arange(len(labels)), labels]))
    accuracy = metrics.accuracy(np.asarray(logits).argmax(axis=-1), labels)
    return {"eval_accuracy": accuracy, "eval_loss": loss, "loss": loss}


class MultipleChoiceRun(FineTuningRun):
    """One run_swag.py invocation: a FineTuningRun of a MultipleChoiceTask."""

    def __init__(self, settings):
        super().__init__(settings, MultipleChoiceTask)
