"""`BertMultipleChoice`: run_swag.py's model on raw strings: a context and its choices -> a score each.

It composes `BertPreprocessor` with the model run_swag.py trains (bert_tf.tasks.multiple_choice.task.
BertMultipleChoice): each choice packs as `[CLS] context [SEP] choice [SEP]`, as that task's export
packs it (`pack_choices`), and exports with that task's export_model, the one export_saved_model.py
calls.

N = questions, C = choices per question.
"""

import keras
import numpy as np
import tensorflow as tf

from bert_tf.models import arguments, presets
from bert_tf.models.networks import multiple_choice_network
from bert_tf.models.networks.task_info import TaskInfo
from bert_tf.models.preprocessor import BertPreprocessor, as_text_batch, preprocessor_argument
from bert_tf.models.task import DEFAULT_BATCH_SIZE, BertTask, integer_labels

# The paper's SWAG recipe: learning rate 2e-5 (BERT paper, section 4.4), 3 epochs, batch 16.
DEFAULT_LEARNING_RATE = 2e-5


@keras.saving.register_keras_serializable(package="bert_tf")
class BertMultipleChoice(BertTask):
    """(contexts, choices) -> logits [N, C]: run_swag.py's multiple-choice model.

    x is `(contexts, choices)`: contexts a list of N strings, choices a list of N lists of C
    strings each (for SWAG, sent2 + " " + ending); y the index of the right choice. `predict`
    gives logits: softmax them for the probabilities. `export` writes run_swag.py's export:
    serving_default(context [N], choices [N, C]) gives "probabilities" and "choice".

    Example:
    ```python
    model = BertMultipleChoice.from_preset("uncased_L-12_H-768_A-12")
    x = (["She was tired."], [["She slept.", "She ran a mile."]])
    model.fit(x=x, y=[0], epochs=3)
    model.predict(x)  # logits [1, 2]
    ```
    """

    default_learning_rate = DEFAULT_LEARNING_RATE
    text_pairs = True

    def __init__(self, preprocessor, bert_config, **kwargs):
        """
        Args:
          preprocessor: a BertPreprocessor (or its config).
          bert_config: a BertConfig, or a dict of bert_config.json keys.
        """
        preprocessor = preprocessor_argument(preprocessor)
        bert_config = arguments.bert_config(bert_config)
        kwargs.setdefault("name", "bert_multiple_choice")
        super().__init__(
            preprocessor, multiple_choice_network.MultipleChoiceNetwork(bert_config), **kwargs
        )

    @classmethod
    def from_preset(cls, folder, *, vocabulary=None, do_lower_case=None, max_seq_length=None):
        """The model of a preset folder (bert_tf.models.presets): a release's encoder with a new
        head, or a run_swag.py output_dir's whole model.

        Raises:
          ValueError: one line naming the folder, before any model is built.
        """
        preset = presets.read_preset(folder, vocabulary, do_lower_case, max_seq_length)
        heads = "optional"
        if preset.kind == "run":
            model_type = preset.task_info.model_type
            if model_type != multiple_choice_network.MODEL_TYPE:
                raise ValueError(
                    f"the run in {preset.folder} trained a {model_type} model, not multiple choice"
                )
            heads = "required"
        model = cls(BertPreprocessor.of_preset(preset), preset.bert_config)
        presets.restore(model.task_model, preset, heads=heads)
        return model

    def call(self, inputs, training=None):
        """{"input_ids", "input_mask", "segment_ids"}: int32 [N, C, S] -> logits float32 [N, C]."""
        return self.task_model(inputs, training=training)["logits"]

    def check_texts(self, x, argument="x"):
        """(contexts [N], choices [N, C]) as numpy object arrays; ValueError naming `argument`."""
        if not isinstance(x, tuple | list) or len(x) != 2 or isinstance(x[0], str | bytes):
            raise ValueError(f"{argument}: give (contexts, choices), a list of choices per context")
        contexts = as_text_batch(x[0], f"{argument}[0]")
        if not len(contexts):
            raise ValueError(f"{argument}: no contexts")
        choices = x[1]
        if isinstance(choices, str | bytes) or len(choices) != len(contexts):
            count = "one string" if isinstance(choices, str | bytes) else len(choices)
            raise ValueError(
                f"{argument}[1]: {count} lists of choices for {len(contexts)} contexts"
            )
        rows = [as_text_batch(row, f"{argument}[1][{i}]") for i, row in enumerate(choices)]
        for index, row in enumerate(rows):
            if len(row) != len(rows[0]) or not len(row):
                raise ValueError(
                    f"{argument}[1][{index}] has {len(row)} choices, but {argument}[1][0] has "
                    f"{len(rows[0])} (every context needs the same number, at least one)"
                )
        self._num_choices = len(rows[0])
        return contexts, np.stack(rows)

    def dataset(self, columns, labels=None, batch_size=DEFAULT_BATCH_SIZE, shuffle=False):
        """Batches of {"input_ids", "input_mask", "segment_ids"} [N, C, S] (and labels)."""
        arguments.integer("batch_size", batch_size, 1)
        texts = tuple(tf.constant(column.tolist(), tf.string) for column in columns)
        tokenizer = self.preprocessor.tokenizer

        def pack(context, choices):
            return multiple_choice_network.pack_choices(tokenizer, context, choices)

        if labels is None:
            dataset = tf.data.Dataset.from_tensor_slices(texts).batch(batch_size)
            dataset = dataset.map(pack, tf.data.AUTOTUNE)
        else:
            dataset = tf.data.Dataset.from_tensor_slices((texts, labels))
            if shuffle:
                dataset = dataset.shuffle(len(columns[0]), reshuffle_each_iteration=True)
            dataset = dataset.batch(batch_size)
            dataset = dataset.map(lambda batch, y: (pack(*batch), y), tf.data.AUTOTUNE)
        return dataset.prefetch(tf.data.AUTOTUNE)

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def check_labels(self, y, num_examples, argument="y"):
        """The index of each context's right choice, int32 [N] in [0, C).

        C is that of the choices last checked: fit and evaluate check x, then y.
        """
        return integer_labels(y, num_examples, self._num_choices, argument)

    def task_info(self):
        """The TaskInfo run_swag.py records for this model (its task.json)."""
        return TaskInfo(
            model_type=multiple_choice_network.MODEL_TYPE,
            bert_config=self.task_model.config,
            do_lower_case=self.preprocessor.do_lower_case,
            max_seq_length=self.preprocessor.max_seq_length,
        )

    def write_export(self, export_dir):
        return multiple_choice_network.export_model(
            self.task_model, self.task_info(), self.preprocessor.vocab_file, export_dir, version=1
        )

    def get_config(self):
        return {
            **super().get_config(),
            "preprocessor": keras.saving.serialize_keras_object(self.preprocessor),
            "bert_config": self.task_model.config.to_dict(),
        }
