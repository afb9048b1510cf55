"""`BertQuestionAnswerer`: run_squad.py's model on raw (question, context) strings.

It composes `BertPreprocessor` with the model run_squad.py trains (bert_tf.models.networks.squad_network.BertSquad),
and reads and answers as that task's export does (bert_tf.models.networks.squad_serving): the context in
doc_stride windows, the best span chosen as the original's write_predictions chooses it, cut from
the context. It exports with that task's export_model, the one export_saved_model.py calls.

Training is SQuAD 1.1's: each question has an answer, given as a character span of its context;
a window holding the whole answer learns its first and last wordpiece, the other windows [CLS].

N = questions, W = windows, T = a window's length.
"""

import keras
import numpy as np
import tensorflow as tf

from bert_tf.errors import InputError
from bert_tf.models import arguments, presets
from bert_tf.models.networks import squad_network, squad_serving
from bert_tf.models.networks.task_info import TaskInfo
from bert_tf.models.preprocessor import BertPreprocessor, as_text_batch, preprocessor_argument
from bert_tf.models.task import DEFAULT_BATCH_SIZE, BertTask

# The paper's SQuAD 1.1 recipe: 3e-5 for 2 epochs (BERT paper, section 4.2).
DEFAULT_LEARNING_RATE = 3e-5
_SETTINGS = ("doc_stride", "max_query_length", "n_best_size", "max_answer_length")


@keras.saving.register_keras_serializable(package="bert_tf")
def span_cross_entropy(y_true, y_pred):
    """run_squad.py's loss: (start + end cross-entropy) / 2, the mean over the windows."""
    positions = tf.cast(y_true, tf.int32)  # [W, 2]
    start = tf.nn.sparse_softmax_cross_entropy_with_logits(positions[:, 0], y_pred[:, :, 0])
    end = tf.nn.sparse_softmax_cross_entropy_with_logits(positions[:, 1], y_pred[:, :, 1])
    return tf.reduce_mean((start + end) / 2.0)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertQuestionAnswerer(BertTask):
    """(questions, contexts) -> answers: run_squad.py's model.

    x is `(questions, contexts)`, two lists of N strings; y the answers' character spans in their
    contexts, `[[start, end], ...]` (end exclusive). `predict` gives the export's serving_default:
    {"answer": N strings cut from the contexts, "score": float32 [N] (start + end logit)}.

    Example:
    ```python
    qa = BertQuestionAnswerer.from_preset("uncased_L-12_H-768_A-12")
    qa.fit(x=(["Who smiled?"], ["Emma smiled."]), y=[[0, 4]], epochs=2)
    qa.predict((["Who smiled?"], ["Emma smiled."]))["answer"]  # ["Emma"], once learned
    ```
    """

    default_learning_rate = DEFAULT_LEARNING_RATE
    text_pairs = True

    def __init__(self, preprocessor, bert_config, **settings):
        """
        Args:
          preprocessor: a BertPreprocessor (or its config); its max_seq_length is the windows'.
          bert_config: a BertConfig, or a dict of bert_config.json keys.
          **settings: run_squad.py's doc_stride, max_query_length, n_best_size,
            max_answer_length (its defaults), and Keras' name, etc.
        """
        preprocessor = preprocessor_argument(preprocessor)
        bert_config = arguments.bert_config(bert_config)
        given = {name: settings.pop(name) for name in _SETTINGS if name in settings}
        self.settings = _qa_settings(preprocessor.max_seq_length, given)
        settings.setdefault("name", "bert_question_answerer")
        super().__init__(preprocessor, squad_network.BertSquad(bert_config), **settings)
        self._answer = tf.function(self._answer_batch, autograph=False)

    @classmethod
    def from_preset(
        cls, folder, *, vocabulary=None, do_lower_case=None, max_seq_length=None, **settings
    ):
        """The model of a preset folder: a release's encoder with a new head, or a run_squad.py
        output_dir's whole model (its windowing and n-best settings from task.json).

        Raises:
          ValueError: one line naming the folder or the argument, before any model is built.
        """
        arguments.known_keywords("BertQuestionAnswerer.from_preset", settings, _SETTINGS)
        for name, value in settings.items():
            arguments.integer(name, value, 1)
        preset = presets.read_preset(folder, vocabulary, do_lower_case, max_seq_length)
        heads = "optional"
        if preset.kind == "run":
            info, where = preset.task_info, f"the run in {preset.folder}"
            if info.model_type != squad_network.MODEL_TYPE:
                raise ValueError(f"{where} trained a {info.model_type} model, not SQuAD")
            if info.settings.version_2_with_negative:
                raise ValueError(f"{where} is a SQuAD 2.0 model: this class answers SQuAD 1.1's")
            for name in _SETTINGS:
                recorded = getattr(info.settings, name)
                if settings.get(name, recorded) != recorded:
                    raise ValueError(f"{name}={settings[name]}, but {where} has {name}={recorded}")
                settings[name] = recorded
            heads = "required"
        _qa_settings(preset.max_seq_length, settings)
        model = cls(BertPreprocessor.of_preset(preset), preset.bert_config, **settings)
        presets.restore(model.task_model, preset, heads=heads)
        return model

    def call(self, inputs, training=None):
        """{"input_ids", "input_mask", "segment_ids"}: int32 [W, T] -> float32 [W, T, 2]: start and
        end logits, padding positions at -10000 (as run_squad.py's loss masks them)."""
        outputs = self.task_model(inputs, training=training)
        padding = (1.0 - tf.cast(inputs["input_mask"], tf.float32)) * -10000.0
        logits = [tf.cast(outputs[name], tf.float32) for name in ("start_logits", "end_logits")]
        return tf.stack(logits, axis=-1) + padding[:, :, None]

    def check_texts(self, x, argument="x"):
        """(questions [N], contexts [N]), numpy object arrays."""
        if not isinstance(x, tuple | list) or len(x) != 2 or isinstance(x[0], str | bytes):
            raise ValueError(f"{argument}: give (questions, contexts), two lists of strings")
        questions = as_text_batch(x[0], f"{argument}[0]")
        contexts = as_text_batch(x[1], f"{argument}[1]")
        if len(questions) != len(contexts) or not len(questions):
            raise ValueError(f"{argument}: {len(questions)} questions and {len(contexts)} contexts")
        self._contexts = contexts
        return questions, contexts

    def check_labels(self, y, num_examples, argument="y"):
        """Character spans [N, 2] -> byte spans int64 [N, 2] of the contexts (UTF-8)."""
        spans = np.asarray(y) if y is not None else None
        if spans is None or spans.shape != (num_examples, 2):
            shape = None if spans is None else spans.shape
            raise ValueError(
                f"{argument}: answer spans [questions, 2] = [{num_examples}, 2], got {shape}"
            )
        if not np.issubdtype(spans.dtype, np.integer):
            raise ValueError(f"{argument}: spans must be integers, got {spans.dtype}")
        byte_spans = []
        for index, ((start, end), context) in enumerate(zip(spans, self._contexts, strict=True)):
            context = context.decode() if isinstance(context, bytes) else context
            if not 0 <= start < end <= len(context) or not context[start:end].strip():
                raise ValueError(
                    f"{argument}[{index}] = [{start}, {end}] is no answer in a context of "
                    f"{len(context)} characters"
                )
            byte_spans.append([len(context[:start].encode()), len(context[:end].encode())])
        return np.array(byte_spans, np.int64)

    def dataset(self, columns, labels=None, batch_size=DEFAULT_BATCH_SIZE, shuffle=False):
        """Batches of windows [W, T] with their (start, end) positions; without labels, of
        (questions, contexts)."""
        arguments.integer("batch_size", batch_size, 1)
        texts = tuple(tf.constant(column.tolist(), tf.string) for column in columns)
        if labels is None:
            return tf.data.Dataset.from_tensor_slices(texts).batch(batch_size)
        dataset = tf.data.Dataset.from_tensor_slices((texts, labels))
        if shuffle:
            dataset = dataset.shuffle(len(labels), reshuffle_each_iteration=True)
        dataset = dataset.batch(batch_size).map(self._windows_of, tf.data.AUTOTUNE)
        return dataset.prefetch(tf.data.AUTOTUNE)

    def _windows_of(self, texts, spans):
        """(questions, contexts), byte spans [B, 2] -> window features [W, T], positions [W, 2]."""
        windows = squad_serving.make_windows(self.preprocessor.tokenizer, self.settings, *texts)
        # The answer's first piece: the first ending after its start; its last: the last starting
        # before its end.
        first = tf.reduce_sum(tf.cast(windows.piece_ends <= spans[:, :1], tf.int64), axis=1)
        last = tf.reduce_sum(tf.cast(windows.piece_starts < spans[:, 1:], tf.int64), axis=1) - 1
        start = tf.gather(first, windows.example_index) - windows.doc_start
        end = tf.gather(last, windows.example_index) - windows.doc_start
        inside = (start >= 0) & (end < windows.doc_length) & (start <= end)
        positions = tf.stack(
            [
                tf.where(inside, start + windows.doc_offset, 0),
                tf.where(inside, end + windows.doc_offset, 0),
            ],
            axis=1,
        )
        return windows.features, tf.cast(positions, tf.int32)

    def _answer_batch(self, question, context):
        windows = squad_serving.make_windows(
            self.preprocessor.tokenizer, self.settings, question, context
        )
        logits = self(windows.features, training=False)
        return squad_serving.select_answers(
            context, windows, logits[:, :, 0], logits[:, :, 1], self.settings
        )

    def predict(self, x, batch_size=None, verbose="auto"):
        """{"answer": a list of N strings, "score": float32 [N]}: the export's serving_default."""
        del verbose  # no progress bar
        columns = self.check_texts(x)
        answers, scores = [], []
        for question, context in self.dataset(columns, None, self._batch_size(batch_size)):
            outputs = self._answer(question, context)
            answers += [answer.decode() for answer in outputs["answer"].numpy()]
            scores.append(outputs["score"].numpy())
        return {"answer": answers, "score": np.concatenate(scores)}

    def default_loss(self):
        return span_cross_entropy

    def default_metrics(self):
        return []

    def task_info(self):
        """The TaskInfo run_squad.py records for this model (its task.json)."""
        return TaskInfo(
            model_type=squad_network.MODEL_TYPE,
            bert_config=self.task_model.config,
            do_lower_case=self.preprocessor.do_lower_case,
            max_seq_length=self.preprocessor.max_seq_length,
            **{name: getattr(self.settings, name) for name in _SETTINGS},
        )

    def write_export(self, export_dir):
        return squad_network.export_model(
            self.task_model, self.task_info(), self.preprocessor.vocab_file, export_dir, version=1
        )

    def get_config(self):
        return {
            **super().get_config(),
            "preprocessor": keras.saving.serialize_keras_object(self.preprocessor),
            "bert_config": self.task_model.config.to_dict(),
            **{name: getattr(self.settings, name) for name in _SETTINGS},
        }


def _qa_settings(max_seq_length, settings):
    """QaSettings of the arguments; ValueError naming the argument."""
    for name, value in settings.items():
        arguments.integer(name, value, 1)
    try:
        return squad_serving.QaSettings(max_seq_length=max_seq_length, **settings)
    except InputError as error:
        raise ValueError(str(error).replace("--", "")) from None
