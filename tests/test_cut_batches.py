"""Training batches cut to their longest input: the original's batches and weights, less padding.

Each task trains twice from the same seeded weights, dropout off: once on batches padded to
max_seq_length (--cut_batches_to_longest=false, the original's), once on the same batches cut to their
longest input (the default). The batches must hold the same examples in the same order, and the
weights after the same steps must agree to float32 rounding.
"""

import dataclasses
import json
import random

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.tasks.classification.task import ClassifierRun, ClassifierSettings
from bert_tf.tasks.squad.task import SquadRun, SquadSettings
from bert_tf.tasks.tagging.task import TaggerRun, TaggerSettings

from conftest import SAMPLE_DIR, assert_float32_close

VOCAB = str(SAMPLE_DIR / "vocab.txt")
MAX_SEQ_LENGTH = 48
WORDS = (
    "the lady walked to a house and said that she was very much in love with his old dog".split()
)
NAMES = "emma fanny jane frank harriet".split()


@pytest.fixture(scope="module")
def bert_config_file(tmp_path_factory):
    config = json.loads((SAMPLE_DIR / "bert_config_tiny.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    path = tmp_path_factory.mktemp("config") / "bert_config.json"
    path.write_text(json.dumps(config))
    return str(path)


def _sentences(count, rng, longest=40):
    """`count` word lists, most of 1 to 10 words, some up to `longest`; some hold a name."""
    sentences = []
    for _ in range(count):
        words = rng.choices(WORDS, k=rng.randint(1, 10 if rng.random() < 0.85 else longest))
        if rng.random() < 0.5:
            words.insert(rng.randrange(len(words) + 1), rng.choice(NAMES))
        sentences.append(words)
    return sentences


def classifier_config(data_dir, rng, **settings):
    """A sentence task: does the sentence name someone (texts of 1 to 41 words)."""
    lines = [
        f"{' '.join(words)}\t{'yes' if set(words) & set(NAMES) else 'no'}"
        for words in _sentences(80, rng)
    ]
    data_dir.mkdir()
    (data_dir / "train.tsv").write_text("\n".join(lines) + "\n")
    return ClassifierSettings(
        task_name="tsv", data_dir=str(data_dir), text_a_column="0", label_column="1",
        train_batch_size=8, num_train_epochs=0.7, **settings,
    )  # fmt: skip


def tagger_config(data_dir, rng, **settings):
    """CoNLL sentences whose names are B-PER; long ones make several windows."""
    lines = []
    for words in _sentences(60, rng, longest=30):
        lines += [f"{w} NNP I-NP {'B-PER' if w in NAMES else 'O'}" for w in words] + [""]
    data_dir.mkdir()
    (data_dir / "train.txt").write_text("\n".join(lines) + "\n")
    return TaggerSettings(
        data_dir=str(data_dir), train_batch_size=8, num_train_epochs=0.9, doc_stride=12, **settings
    )


def squad_config(data_dir, rng, **settings):
    """Questions on contexts of 3 to 40 words: the longer ones make several windows."""
    paragraphs = []
    for index, words in enumerate(_sentences(24, rng)):
        answer = rng.choice(words)
        context = " ".join(words)
        question = {
            "id": f"q{index}",
            "question": f"which word is {answer}",
            "answers": [{"text": answer, "answer_start": context.index(answer)}],
        }
        paragraphs.append({"context": context, "qas": [question]})
    data_dir.mkdir()
    path = data_dir / "train.json"
    path.write_text(
        json.dumps({"version": "v1.1", "data": [{"title": "t", "paragraphs": paragraphs}]})
    )
    return SquadSettings(
        train_file=str(path), doc_stride=16, max_query_length=12, train_batch_size=8,
        num_train_epochs=2.5, **settings,
    )  # fmt: skip


class Recorder:
    """Keeps every training batch a run reads (all its features, numpy), in the order read."""

    def __init__(self):
        self.batches = []

    def __call__(self, batch):
        names = sorted(batch)

        def keep(*values):
            self.batches.append({n: v.numpy() for n, v in zip(names, values, strict=True)})
            return 0

        kept = tf.py_function(keep, [batch[n] for n in names], tf.int32)
        with tf.control_dependencies([kept]):
            return {name: tf.identity(value) for name, value in batch.items()}


def recording(run_class):
    class RecordingRun(run_class):
        recorder = None

        def dataset(self, path, batch_size, is_training, input_context=None, num_records=None):
            dataset = super().dataset(path, batch_size, is_training, input_context, num_records)
            return dataset.map(self.recorder) if is_training else dataset

    return RecordingRun


def train(run_class, config):
    """(the run, its weights before training and after, its training batches in order)."""
    run = recording(run_class)(config)
    run.recorder = Recorder()
    path, info = run.features("train")
    trainer = run.trainer(path, info["num_real_examples"])
    initial = [w.numpy() for w in trainer.model.weights]
    run.train()
    final = [w.numpy() for w in trainer.model.weights]
    return run, initial, final, run.recorder.batches[: trainer.global_step]


@pytest.mark.parametrize(
    "run_class, make_config",
    [
        # The classifier is the slowest of the three here (about 80 s on 2 cores): make test runs it, make test-quick does not.
        pytest.param(ClassifierRun, classifier_config, marks=pytest.mark.slow),
        (TaggerRun, tagger_config),
        (SquadRun, squad_config),
    ],
    ids=["classifier", "tagger", "squad"],
)
def test_cut_batches_hold_the_padded_ones_examples_and_train_to_the_same_weights(
    run_class, make_config, bert_config_file, tmp_path
):
    config = make_config(
        tmp_path / "data", random.Random(3),
        bert_config_file=bert_config_file, vocab_file=VOCAB, max_seq_length=MAX_SEQ_LENGTH,
        learning_rate=1e-3, do_train=True, seed=5, iterations_per_loop=1000, log_steps=1000,
        save_checkpoints_steps=1000,
    )  # fmt: skip
    assert config.cut_batches_to_longest  # the default
    runs = {
        cut: train(
            run_class,
            dataclasses.replace(
                config, cut_batches_to_longest=cut, output_dir=str(tmp_path / str(cut))
            ),
        )
        for cut in (False, True)
    }
    (_, initial, padded, padded_batches) = runs[False]
    (cut_run, cut_initial, cut, cut_batches) = runs[True]
    num_steps = len(padded_batches)
    assert num_steps >= 6 and len(cut_batches) == num_steps

    # The same examples in the same batches, in the same order: the padded batch, less the columns
    # past the cut, which hold padding only. The cut is the longest input rounded up to 8.
    widths = []
    for padded_batch, cut_batch in zip(padded_batches, cut_batches, strict=True):
        assert sorted(cut_batch) == sorted(padded_batch)
        width = cut_batch["input_ids"].shape[-1]
        longest = padded_batch["input_mask"].sum(axis=-1).max()
        assert width == min(-(-longest // 8) * 8, MAX_SEQ_LENGTH)
        assert not padded_batch["input_mask"][..., width:].any()
        widths.append(width)
        for name, value in padded_batch.items():
            if name in cut_run.task.sequence_features:
                np.testing.assert_array_equal(cut_batch[name], value[..., :width], err_msg=name)
            else:
                np.testing.assert_array_equal(cut_batch[name], value, err_msg=name)
    assert len(set(widths) - {MAX_SEQ_LENGTH}) >= 2, widths  # several cut shapes met
    assert all(b["input_ids"].shape[-1] == MAX_SEQ_LENGTH for b in padded_batches)
    # One trace of the training loop for every width: the cut width is None in its signature.
    assert cut_run.trainer()._train_loop_fn.experimental_get_tracing_count() == 1

    # One starting point, the same steps: the same weights.
    for start, cut_start in zip(initial, cut_initial, strict=True):
        np.testing.assert_array_equal(cut_start, start)

    def all_steps(weights):  # every weight's change, one vector
        return np.concatenate([(w - w0).ravel() for w, w0 in zip(weights, initial, strict=True)])

    steps, cut_steps = all_steps(padded), all_steps(cut)
    assert np.abs(steps).max() > 1e-2  # lr 1e-3 over 5 to 7 steps
    # Adam divides each gradient by its root mean square + 1e-6. Where a gradient is zero in exact
    # arithmetic (attention key biases; SQuAD's output bias, its softmax being shift-invariant) it
    # is rounding noise, which Adam turns into steps: there the runs differ by up to 1130 float32
    # eps of the largest step (measured; 60 elsewhere). 8192 eps (2e-5 here) stands 7x above that;
    # a fault moves weights by far more (the longest input's last token cut: 5e-3 to 1e-2; a SQuAD
    # loss whose softmax spreads over the padding, as the original's: 1.8e-2).
    assert_float32_close(cut_steps, steps, eps_multiple=8192)
