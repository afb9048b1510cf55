"""Bad input ends a script with one `error:` line naming the flag, file or line, before any work.

One table of cases, each a script's command line in a folder of its own: the script must exit with
status 1, print no traceback, end stderr with the expected `error:` line, and leave the output folder
as it found it (no features, no checkpoint, no half-written file).
"""

import json
import os
import re

import pytest

from conftest import REPO_DIR, SAMPLE_DIR, SUBPROCESS_ENV

TINY_CONFIG = str(SAMPLE_DIR / "bert_config_tiny.json")
VOCAB = str(SAMPLE_DIR / "vocab.txt")


def _files(folder):
    return sorted(
        os.path.relpath(os.path.join(root, name), folder)
        for root, _, names in os.walk(folder)
        for name in names
    )


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Small good and bad inputs, and a checkpoint of another hidden size in our format."""
    root = tmp_path_factory.mktemp("inputs")
    tsv = root / "tsv"
    tsv.mkdir()
    (tsv / "train.tsv").write_text("a happy day\tpos\na sad day\tneg\n" * 4)
    (tsv / "dev.tsv").write_text("a happy day\tpos\na grey day\tmeh\n")
    (tsv / "test.tsv").write_text("a day\n")
    ner = root / "ner"
    ner.mkdir()
    (ner / "train.txt").write_text("Emma B-PER\nwalked O\n\n" * 4)
    (ner / "dev.txt").write_text("Emma B-PER\nwalked\tO extra\n")
    (root / "file").write_text("not a folder")
    (root / "text.txt").write_text("One sentence.\nAnother one.\n\nA second document.\nIts end.\n")
    # A checkpoint of ours with hidden size 32 (the tiny config has 64), with its task.json.
    import tensorflow as tf

    from bert_tf.modeling import BertConfig
    from bert_tf.models.networks.classifier_network import BertClassifier

    config = json.loads(open(TINY_CONFIG).read())
    narrow = BertClassifier(BertConfig.from_dict({**config, "hidden_size": 32}), 2)
    narrow(narrow.dummy_inputs())
    (root / "narrow").mkdir()
    tf.train.Checkpoint(model=narrow).save(str(root / "narrow" / "model.ckpt"))
    (root / "narrow" / "task.json").write_text(json.dumps({"model_type": "classifier"}))
    # A pretraining TFRecord cut short.
    from bert_tf.data.pretraining import encoding, instances

    instance = instances.TrainingInstance(
        [101, 7592, 102, 2088, 102], [0, 0, 0, 1, 1], [1], [7592], False
    )
    encoder = encoding.ExampleEncoder(8, 2, max_id=30522)
    records = encoding.frame_records([encoder.encode(instance)] * 4)
    (root / "cut.tfrecord").write_bytes(b"".join(records)[:-9])
    # Phase 1's records (here 8 / 2) read by phase 2's flags; records of a larger vocab.
    (root / "phase1.tfrecord").write_bytes(b"".join(records))
    wide = instances.TrainingInstance(
        [101, 40000, 102, 2088, 102], [0, 0, 0, 1, 1], [1], [40000], False
    )
    wide_records = encoding.frame_records(
        [encoding.ExampleEncoder(8, 2, max_id=50000).encode(wide)]
    )
    (root / "wide.tfrecord").write_bytes(b"".join(wide_records))
    # Vocabs: one line longer than the tiny config's vocab_size; each without a special token.
    lines = open(VOCAB, encoding="utf-8").read().splitlines()
    (root / "big_vocab.txt").write_text("\n".join([*lines, "[extra]"]) + "\n")
    for token in ("[CLS]", "[UNK]", "[MASK]"):
        name = f"no_{token.strip('[]').lower()}_vocab.txt"
        (root / name).write_text("\n".join(x if x != token else "[gone]" for x in lines) + "\n")
    return root


def _classifier(inputs, out, *flags):
    return [
        "run_classifier.py", f"--bert_config_file={TINY_CONFIG}", f"--vocab_file={VOCAB}",
        "--task_name=tsv", f"--data_dir={inputs / 'tsv'}", "--text_a_column=0",
        "--label_column=1", "--max_seq_length=16", f"--output_dir={out}", *flags,
    ]  # fmt: skip


# (case id, command (inputs, output folder) -> argv, the expected last stderr line as a regex[,
#  files the run may have written besides])
CASES = [
    (
        "dev label not in train",
        lambda i, out: _classifier(i, out, "--do_train", "--do_eval"),
        r"error: .*tsv/dev\.tsv:2: label 'meh' is not one of the training file's labels",
    ),
    (
        "malformed NER dev file",
        lambda i, out: [
            "run_ner.py",
            f"--bert_config_file={TINY_CONFIG}",
            f"--vocab_file={VOCAB}",
            f"--data_dir={i / 'ner'}",
            f"--output_dir={out}",
            "--do_train",
            "--do_eval",
        ],  # fmt: skip
        r"error: .*ner/dev\.txt:2: ",
    ),
    (
        "missing --init_checkpoint",
        lambda i, out: _classifier(i, out, "--do_train", f"--init_checkpoint={i / 'nope.ckpt'}"),
        r"error: --init_checkpoint: no checkpoint at .*nope\.ckpt",
    ),
    (
        "--init_checkpoint of another hidden size",
        lambda i, out: _classifier(i, out, "--do_train", f"--init_checkpoint={i / 'narrow'}"),
        r"error: --init_checkpoint: .*narrow/model\.ckpt-1: bert/embeddings/word_embeddings of the "
        r"encoder has shape \[30522, 32\] in the checkpoint but \[30522, 64\] in the model",
    ),
    (
        "--output_dir under a regular file",
        lambda i, out: _classifier(i, i / "file" / "out", "--do_train"),
        r"error: --output_dir=.*file/out: .*file is a file, not a folder",
    ),
    (
        "predicting with nothing trained",
        lambda i, out: _classifier(i, out, "--do_predict"),
        r"error: nothing to evaluate or predict with: --output_dir=.* has no checkpoint",
    ),
    (
        "missing vocab in create_pretraining_data.py",
        lambda i, out: [
            "create_pretraining_data.py",
            f"--input_file={i / 'text.txt'}",
            f"--output_file={out / 'x.tfrecord'}",
            f"--vocab_file={i / 'no_vocab.txt'}",
        ],  # fmt: skip
        r"error: --vocab_file=.*no_vocab\.txt does not exist",
    ),
    (
        "missing vocab in extract_features.py",
        lambda i, out: [
            "extract_features.py",
            f"--input_file={i / 'text.txt'}",
            f"--output_file={out / 'x.jsonl'}",
            f"--vocab_file={i / 'no_vocab.txt'}",
            f"--bert_config_file={TINY_CONFIG}",
            f"--init_checkpoint={i / 'narrow'}",
        ],  # fmt: skip
        r"error: --vocab_file=.*no_vocab\.txt does not exist",
    ),
    (
        "--max_seq_length over max_position_embeddings in run_pretraining.py",
        lambda i, out: [
            "run_pretraining.py",
            f"--input_file={i / 'cut.tfrecord'}",
            f"--output_dir={out}",
            f"--bert_config_file={TINY_CONFIG}",
            "--max_seq_length=512",
            "--do_train",
        ],  # fmt: skip
        r"error: --max_seq_length=512 exceeds max_position_embeddings=128",
    ),
    (
        "a truncated pretraining TFRecord",
        lambda i, out: [
            "run_pretraining.py",
            f"--input_file={i / 'cut.tfrecord'}",
            f"--output_dir={out}",
            f"--bert_config_file={TINY_CONFIG}",
            "--max_seq_length=8",
            "--max_predictions_per_seq=2",
            "--do_eval",
            "--eval_batch_size=1",
            "--max_eval_steps=8",
        ],  # fmt: skip
        r"error: .*cut\.tfrecord: corrupt or truncated TFRecord at record 3 \([^)]*\)$",
        # Read only while it runs (a corpus is too large to read twice): task.json is written.
        ["task.json"],
    ),
    (
        "export_saved_model.py on a folder with no checkpoint",
        lambda i, out: [
            "export_saved_model.py",
            f"--init_checkpoint={i / 'tsv'}",
            f"--export_dir={out / 'export'}",
            f"--vocab_file={VOCAB}",
        ],  # fmt: skip
        r"error: --init_checkpoint: .*tsv holds neither bert_model\.ckpt\.\* nor a training checkpoint",
    ),
    (
        "--use_tpu with no TPU reachable",
        lambda i, out: _classifier(i, out, "--do_train", "--use_tpu=True", "--tpu_name=my-tpu"),
        r"error: no TPU reachable for --tpu_name='my-tpu'",
    ),
    (
        "vocab longer than the config's vocab_size, fine-tuning",
        lambda i, out: _classifier(i, out, "--do_train", f"--vocab_file={i / 'big_vocab.txt'}"),
        r"error: --vocab_file=.*big_vocab\.txt has 30523 entries but --bert_config_file=.*"
        r"bert_config_tiny\.json has vocab_size=30522: ids from 30522 on have no embedding",
    ),
    (
        "vocab longer than the config's vocab_size, export",
        lambda i, out: [
            "export_saved_model.py",
            f"--init_checkpoint={i / 'narrow'}",
            f"--export_dir={out / 'export'}",
            f"--vocab_file={i / 'big_vocab.txt'}",
            f"--bert_config_file={TINY_CONFIG}",
        ],  # fmt: skip
        r"error: --vocab_file=.*big_vocab\.txt has 30523 entries but --bert_config_file=.*"
        r"bert_config_tiny\.json has vocab_size=30522",
    ),
    (
        "vocab longer than the config's vocab_size, extract_features.py",
        lambda i, out: [
            "extract_features.py",
            f"--input_file={i / 'text.txt'}",
            f"--output_file={out / 'x.jsonl'}",
            f"--vocab_file={i / 'big_vocab.txt'}",
            f"--bert_config_file={TINY_CONFIG}",
            f"--init_checkpoint={i / 'narrow'}",
        ],  # fmt: skip
        r"error: --vocab_file=.*big_vocab\.txt has 30523 entries but --bert_config_file=.*"
        r"bert_config_tiny\.json has vocab_size=30522",
    ),
    (
        "vocab without [UNK], fine-tuning",
        lambda i, out: [
            "run_ner.py",
            f"--bert_config_file={TINY_CONFIG}",
            f"--vocab_file={i / 'no_unk_vocab.txt'}",
            f"--data_dir={i / 'ner'}",
            f"--output_dir={out}",
            "--do_train",
        ],  # fmt: skip
        r"error: --vocab_file=.*no_unk_vocab\.txt lacks \[UNK\] \(a line each\)",
    ),
    (
        "vocab without [CLS], extract_features.py",
        lambda i, out: [
            "extract_features.py",
            f"--input_file={i / 'text.txt'}",
            f"--output_file={out / 'x.jsonl'}",
            f"--vocab_file={i / 'no_cls_vocab.txt'}",
            f"--bert_config_file={TINY_CONFIG}",
            f"--init_checkpoint={i / 'narrow'}",
        ],  # fmt: skip
        r"error: --vocab_file=.*no_cls_vocab\.txt lacks \[CLS\] \(a line each\)",
    ),
    (
        "vocab without [MASK], create_pretraining_data.py",
        lambda i, out: [
            "create_pretraining_data.py",
            f"--input_file={i / 'text.txt'}",
            f"--output_file={out / 'x.tfrecord'}",
            f"--vocab_file={i / 'no_mask_vocab.txt'}",
        ],  # fmt: skip
        r"error: --vocab_file=.*no_mask_vocab\.txt lacks \[MASK\] \(a line each\)",
    ),
    (
        "pretraining records of other lengths (phase 1 -> phase 2)",
        lambda i, out: [
            "run_pretraining.py",
            f"--input_file={i / 'phase1.tfrecord'}",
            f"--output_dir={out}",
            f"--bert_config_file={TINY_CONFIG}",
            "--max_seq_length=16",
            "--max_predictions_per_seq=3",
            "--do_train",
        ],  # fmt: skip
        r"error: --input_file: .*phase1\.tfrecord holds records of max_seq_length=8, "
        r"max_predictions_per_seq=2, but the flags give --max_seq_length=16 "
        r"--max_predictions_per_seq=3",
    ),
    (
        "pretraining records of a larger vocab",
        lambda i, out: [
            "run_pretraining.py",
            f"--input_file={i / 'wide.tfrecord'}",
            f"--output_dir={out}",
            f"--bert_config_file={TINY_CONFIG}",
            "--max_seq_length=8",
            "--max_predictions_per_seq=2",
            "--do_train",
        ],  # fmt: skip
        r"error: --input_file: .*wide\.tfrecord holds token id 40000 in record 0, but "
        r"--bert_config_file=.*bert_config_tiny\.json has vocab_size=30522",
    ),
    (
        "extract_features.py --use_tpu",
        lambda i, out: [
            "extract_features.py",
            f"--input_file={i / 'text.txt'}",
            f"--output_file={out / 'x.jsonl'}",
            f"--vocab_file={VOCAB}",
            f"--bert_config_file={TINY_CONFIG}",
            f"--init_checkpoint={i / 'narrow'}",
            "--use_tpu=true",
        ],  # fmt: skip
        r"error: --use_tpu: extract_features\.py runs on this machine's first GPU, else its CPU",
    ),
    (
        "--do_lower_case against a cased release",
        lambda i, out: _classifier(
            i, out, "--do_train", "--init_checkpoint=/x/cased_L-12_H-768_A-12/bert_model.ckpt"
        ),
        r"error: --do_lower_case=True but --init_checkpoint=.* is the cased release "
        r"cased_L-12_H-768_A-12: pass --do_lower_case=False",
    ),
]


@pytest.fixture(scope="module")
def outcomes(inputs, tmp_path_factory):
    """Every case's (stderr, output folder before, after): run as processes side by side."""
    import subprocess
    import sys

    started = {}
    for case, argv, *_ in CASES:
        out = tmp_path_factory.mktemp("out")
        (out / "kept.txt").write_text("written before the run")
        args = argv(inputs, out)
        process = subprocess.Popen(
            [sys.executable, os.path.join(REPO_DIR, args[0]), *args[1:]],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=SUBPROCESS_ENV,
        )  # fmt: skip
        started[case] = (process, out)
    results = {}
    for case, (process, out) in started.items():
        _, stderr = process.communicate(timeout=300)
        results[case] = (process.returncode, stderr, _files(out))
    return results


@pytest.mark.parametrize(
    "case, expected, written",
    [(case[0], case[2], case[3] if len(case) > 3 else []) for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_bad_input_is_one_error_line_before_any_work(outcomes, case, expected, written):
    status, stderr, files = outcomes[case]
    assert status == 1, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert re.search(expected, last), last
    assert files == sorted(["kept.txt", *written]), files
