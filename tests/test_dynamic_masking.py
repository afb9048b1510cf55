"""Dynamic masking: create_pretraining_data.py --dynamic_masking writes unmasked records, and
run_pretraining.py --dynamic_masking masks them as it reads them, by the original's rules.

The rules are checked against their definition (the original create_pretraining_data.py): the count
min(P, max(1, round(length * prob))) exactly per record, the 80/10/10 split within 5 standard errors
of the binomial (a fixed seed: the same draws every run), whole words from the vocab's "##" pieces.
"""

import collections
import math
import os

import numpy as np
import pytest
import tensorflow as tf
from test_preemption import (
    _assert_same_final_state,
    _has_checkpoint,
    _kill_all,
    _run,
    _start,
    _wait_for,
)

import create_pretraining_data
from bert_tf import tokenization
from bert_tf.data.pretraining import masking, reader, writer
from bert_tf.errors import InputError
from bert_tf.tasks.pretraining import PretrainingRun, PretrainingSettings

from conftest import SAMPLE_DIR

SEQ, PREDICTIONS = 64, 10
VOCAB = SAMPLE_DIR / "vocab.txt"


def _write(input_file, output_file, **flags):
    values = dict(
        input_file=str(input_file), output_file=str(output_file), vocab_file=str(VOCAB),
        max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, dupe_factor=1, num_workers=1,
        random_seed=3, dynamic_masking=True,
    )  # fmt: skip
    values.update(flags)
    create_pretraining_data.run(writer.CreateSettings(**values))
    return str(output_file)


@pytest.fixture(scope="module")
def text(tmp_path_factory, austen_sentences_path):
    """1,200 Austen sentences in documents of 6 sentences."""
    lines = austen_sentences_path.read_text(encoding="utf-8").splitlines()[:1200]
    documents = ["\n".join(lines[k : k + 6]) for k in range(0, len(lines), 6)]
    path = tmp_path_factory.mktemp("dynamic_text") / "text.txt"
    path.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def records(tmp_path_factory, text):
    """The unmasked records of `text`."""
    return _write(text, tmp_path_factory.mktemp("dynamic") / "dynamic.tfrecord")


def _raw(path):
    """The unmasked records as dicts of numpy arrays."""
    spec = masking.feature_spec(SEQ)
    return [
        {k: v.numpy() for k, v in tf.io.parse_single_example(r, spec).items()}
        for r in tf.data.TFRecordDataset(path)
    ]


def _read(path, num_records, whole_words=False, seed=11, is_training=True, prob=0.15):
    options = masking.MaskingOptions(PREDICTIONS, prob, whole_words, seed)
    dataset = reader.make_pretraining_dataset(
        path, 1, SEQ, PREDICTIONS, is_training, seed=seed, masking=options, repeat=True
    )
    batches = dataset.unbatch().take(num_records)
    return [{k: v.numpy() for k, v in batch.items()} for batch in batches]


def _original(example):
    """The record's ids before masking: its masked positions given back their labels."""
    ids = example["input_ids"].copy()
    count = int(example["masked_lm_weights"].sum())
    ids[example["masked_lm_positions"][:count]] = example["masked_lm_ids"][:count]
    return tuple(ids.tolist())


def _num_to_predict(example):
    length = int(example["input_mask"].sum())
    return min(PREDICTIONS, max(1, round(length * 0.15)))  # Python's round: half to even


def test_each_record_gets_the_original_count_and_the_80_10_10_split(records):
    vocab = tokenization.load_vocab(str(VOCAB))
    vocab_size, mask_id = len(vocab), vocab["[MASK]"]
    special = (vocab["[CLS]"], vocab["[SEP]"])
    examples = _read(records, 4 * len(_raw(records)))  # four passes
    outcomes = collections.Counter()
    random_ids = []
    for example in examples:
        count = int(example["masked_lm_weights"].sum())
        assert count == _num_to_predict(example)
        positions = example["masked_lm_positions"][:count]
        assert np.all(np.diff(positions) > 0)
        original = np.array(_original(example))
        assert original[0] == special[0] and not np.isin(original[positions], special).any()
        for position, label in zip(positions, example["masked_lm_ids"][:count], strict=True):
            new = example["input_ids"][position]
            kind = "mask" if new == mask_id else "kept" if new == label else "random"
            outcomes[kind] += 1
            if kind == "random":
                random_ids.append(new)
    total = sum(outcomes.values())
    assert total > 20000
    # A uniform id equals [MASK] or the label with probability 2 / vocab_size: well below 1 sigma.
    for kind, p in (("mask", 0.8), ("random", 0.1), ("kept", 0.1)):
        sigma = math.sqrt(p * (1 - p) / total)
        assert abs(outcomes[kind] / total - p) < 5 * sigma, (kind, outcomes[kind] / total)
    # Random replacements are uniform over the vocab: mean (V - 1) / 2, sd V / sqrt(12).
    sigma = vocab_size / math.sqrt(12 * len(random_ids))
    assert abs(np.mean(random_ids) - (vocab_size - 1) / 2) < 5 * sigma


def test_masked_positions_are_uniform_over_the_tokens(records):
    examples = _read(records, 2 * len(_raw(records)))
    relative, length_sum = [], 0
    for example in examples:
        length = int(example["input_mask"].sum())
        count = int(example["masked_lm_weights"].sum())
        # Positions 1 .. length - 2 minus the middle [SEP]: their mean place is about one half.
        relative += [p / (length - 1) for p in example["masked_lm_positions"][:count]]
        length_sum += length
    assert abs(np.mean(relative) - 0.5) < 5 * math.sqrt(1 / 12 / len(relative)) + 0.01
    # The overall masked fraction is the flag's, up to the rounding of each record's count.
    assert abs(len(relative) / length_sum - 0.15) < 0.01


def test_whole_words_are_masked_together(records):
    inv_vocab = {i: t for t, i in tokenization.load_vocab(str(VOCAB)).items()}
    examples = _read(records, 2 * len(_raw(records)), whole_words=True)
    split_words = 0
    for example in examples:
        tokens = [inv_vocab[i] for i in _original(example)]
        length = int(example["input_mask"].sum())
        words, word = [], []  # position lists, from the tokens' "##" marks
        for position, token in enumerate(tokens[:length]):
            if token in ("[CLS]", "[SEP]"):
                words.append(word)
                word = []
            elif token.startswith("##") and word:
                word.append(position)
            else:
                words.append(word)
                word = [position]
        words.append(word)
        count = int(example["masked_lm_weights"].sum())
        chosen = set(example["masked_lm_positions"][:count].tolist())
        for word in words:
            assert chosen.isdisjoint(word) or chosen.issuperset(word), (tokens, word, chosen)
            split_words += len(word) > 1 and chosen.issuperset(word)
        assert _num_to_predict(example) - 4 <= count <= _num_to_predict(example)
    assert split_words > 50  # words of several pieces were masked, whole


def test_each_pass_masks_differently_and_a_second_reader_masks_alike(records):
    num_records = len(_raw(records))
    masks = collections.defaultdict(list)
    # The shuffle buffer mixes the ends of passes: a record's occurrences are of distinct passes.
    examples = _read(records, 2 * num_records)
    for example in examples:
        masks[_original(example)].append(tuple(example["masked_lm_positions"].tolist()))
    twice = [m for m in masks.values() if len(m) == 2]
    assert len(masks) == num_records and len(twice) > 0.8 * num_records
    assert sum(first != second for first, second in twice) > 0.9 * len(twice)
    # The same seed, a new reader: the same records in the same order, the same masks.
    again = _read(records, num_records)
    for a, b in zip(again, examples, strict=False):
        assert all(np.array_equal(a[k], b[k]) for k in a)
    # Another --seed: other masks (the records come in another order: compare record by record).
    other_seed = {
        _original(e): tuple(e["masked_lm_positions"].tolist())
        for e in _read(records, num_records, seed=12)
    }
    same = sum(positions in masks[key] for key, positions in other_seed.items())
    assert same < 0.2 * len(other_seed)


def test_evaluation_masks_every_repetition_alike(records):
    num_records = len(_raw(records))
    examples = _read(records, 2 * num_records, is_training=False)
    for first, second in zip(examples[:num_records], examples[num_records:], strict=True):
        assert all(np.array_equal(first[k], second[k]) for k in first)


def _run_config(tmp_path, input_file, **flags):
    values = dict(
        bert_config_file=str(SAMPLE_DIR / "bert_config_tiny.json"), input_file=input_file,
        output_dir=str(tmp_path / "out"), max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS,
        do_train=True, num_train_steps=2,
    )  # fmt: skip
    values.update(flags)
    return PretrainingSettings(**values)


def test_records_that_do_not_match_the_flags_are_one_error_line(
    records, tmp_path, sample_text_path
):
    with pytest.raises(InputError, match=r"holds unmasked records .*pass --dynamic_masking=True"):
        PretrainingRun(_run_config(tmp_path, records))
    static = _write(sample_text_path, tmp_path / "static.tfrecord", dynamic_masking=False)
    with pytest.raises(InputError, match=r"holds masked records .*--dynamic_masking=True"):
        PretrainingRun(_run_config(tmp_path, static, dynamic_masking=True))
    with pytest.raises(InputError, match=r"max_seq_length=64, .* --max_seq_length=128"):
        PretrainingRun(_run_config(tmp_path, records, dynamic_masking=True, max_seq_length=128))
    with pytest.raises(InputError, match=r"max_predictions_per_seq=10, .*_per_seq=20"):
        PretrainingRun(_run_config(tmp_path, static, max_predictions_per_seq=20))
    with pytest.raises(InputError, match=r"--dynamic_masking applies to .* not --objective=ltr"):
        _write(sample_text_path, tmp_path / "ltr.tfrecord", objective="ltr")
    assert not os.path.exists(tmp_path / "ltr.tfrecord")
    with pytest.raises(InputError, match=r"--dynamic_masking applies to .* not --objective=ltr"):
        _run_config(tmp_path, records, dynamic_masking=True, objective="ltr").check()


def test_objective_mlm_records_are_one_segment_and_train(tmp_path, sample_text_path):
    path = _write(sample_text_path, tmp_path / "mlm.tfrecord", objective="mlm")
    raw = _raw(path)
    assert all(not r["segment_ids"].any() for r in raw)
    config = _run_config(tmp_path, path, dynamic_masking=True, objective="mlm", train_batch_size=4)
    results = PretrainingRun(config).run().train()
    assert results["global_step"] == 2
    with pytest.raises(InputError, match=r"--objective=mlm_nsp, but .* --objective=mlm"):
        PretrainingRun(_run_config(tmp_path, path, dynamic_masking=True))


@pytest.mark.slow
def test_sigkill_after_a_checkpoint_and_the_same_command_end_as_the_uninterrupted_run(
    tmp_path, sample_text_path
):
    """Dropout 0.1 and 8 to 16 passes over the records in 40 steps: the resumed run must read the
    same batches, draw the same dropout and the same masks of each pass as the uninterrupted one."""
    short_text = tmp_path / "text.txt"
    short_text.write_text("\n".join(sample_text_path.read_text().splitlines()[:60]) + "\n")
    short_records = _write(short_text, tmp_path / "dynamic.tfrecord", do_whole_word_mask=True)
    assert 20 <= len(_raw(short_records)) <= 40  # 3 to 5 steps a pass
    flags = dict(
        bert_config_file=SAMPLE_DIR / "bert_config_tiny.json", input_file=short_records,
        output_dir=tmp_path / "straight", max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS,
        train_batch_size=8, learning_rate=1e-3, num_train_steps=40, num_warmup_steps=2,
        save_checkpoints_steps=10, iterations_per_loop=1, log_steps=5, do_train=True, seed=3,
        dynamic_masking=True, do_whole_word_mask=True,
    )  # fmt: skip
    _run("run_pretraining.py", flags, tmp_path / "straight.log")
    killed = {**flags, "output_dir": tmp_path / "killed"}
    log = tmp_path / "killed.log"
    process = _start("run_pretraining.py", killed, log)
    try:
        _wait_for(_has_checkpoint(tmp_path / "killed", 20), [process], log)
    finally:
        _kill_all([process])
    assert not os.path.exists(tmp_path / "killed" / "model.ckpt-40.index")
    _run("run_pretraining.py", killed, tmp_path / "resumed.log")
    assert "Input position restored from" in (tmp_path / "resumed.log").read_text()
    _assert_same_final_state(tmp_path / "killed", tmp_path / "straight")


@pytest.mark.slow
def test_the_beam_path_writes_the_same_unmasked_records(text, records, tmp_path):
    options = "runner=DirectRunner,direct_num_workers=2,direct_running_mode=multi_processing"
    summary = create_pretraining_data.run(
        writer.CreateSettings(
            input_file=str(text), output_file=str(tmp_path / "beam"), vocab_file=str(VOCAB),
            max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, dupe_factor=1,
            random_seed=3, dynamic_masking=True, beam_pipeline_options=options,
            num_output_shards=2,
        )
    )  # fmt: skip

    def multiset(paths):
        return collections.Counter(r.numpy() for r in tf.data.TFRecordDataset(paths))

    assert multiset(summary.output_files) == multiset(records)
    assert (
        "word_ids"
        in tf.train.Example.FromString(
            next(iter(tf.data.TFRecordDataset(summary.output_files))).numpy()
        ).features.feature
    )
