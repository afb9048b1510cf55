"""create_pretraining_data.py --beam_pipeline_options: the one-machine run's records, on Beam.

Every pipeline here runs on Beam's local runner with two worker processes, as the README's command.
"""

import collections
import glob
import os
import re
import subprocess
import sys

import pytest
import tensorflow as tf

import create_pretraining_data
import run_pretraining
from bert_tf.beam import pipeline, pretraining_data
from bert_tf.data.pretraining import reader, writer
from bert_tf.errors import InputError
from bert_tf.tasks.pretraining import PretrainingSettings

from conftest import REPO_DIR, SUBPROCESS_ENV

SAMPLE_DIR = REPO_DIR / "sample_data"
TWO_PROCESSES = "runner=DirectRunner,direct_num_workers=2,direct_running_mode=multi_processing"
SEQ, PREDICTIONS = 64, 10


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, austen_sentences_path):
    """Three files of Austen, documents of 2 to 8 sentences, and the sample text: 4 files, 40 chunks."""
    folder = tmp_path_factory.mktemp("corpus")
    sentences = austen_sentences_path.read_text(encoding="utf-8").splitlines()[:2400]
    for k in range(3):
        part, documents, start = sentences[k * 800 : (k + 1) * 800], [], 0
        while start < len(part):
            length = 2 + (start * 7 + k) % 7
            documents.append("\n".join(part[start : start + length]))
            start += length
        (folder / f"austen-{k}.txt").write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    (folder / "sample.txt").write_bytes((SAMPLE_DIR / "sample_text.txt").read_bytes())
    return folder


def _config(input_file, output_file, **flags):
    values = dict(
        input_file=str(input_file), output_file=str(output_file),
        vocab_file=str(SAMPLE_DIR / "vocab.txt"), max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS,
        dupe_factor=2, chunk_bytes=8192, num_workers=1, random_seed=7,
    )  # fmt: skip
    values.update(flags)
    return writer.CreateSettings(**values)


def _records(paths, compression_type=""):
    dataset = tf.data.TFRecordDataset(paths, compression_type=compression_type)
    return collections.Counter(record.numpy() for record in dataset)


def _one_machine_and_beam(corpus, tmp_path, **flags):
    """(records of the one-machine run, records of the Beam run's shards, the Beam summary)."""
    create_pretraining_data.run(_config(f"{corpus}/*.txt", tmp_path / "one.tfrecord", **flags))
    (tmp_path / "beam").mkdir()
    summary = create_pretraining_data.run(
        _config(
            f"{corpus}/*.txt",
            tmp_path / "beam" / "out",
            beam_pipeline_options=TWO_PROCESSES,
            num_output_shards=3,
            **flags,
        )
    )
    compression = "GZIP" if flags.get("output_compression") else ""
    shards = sorted(glob.glob(f"{tmp_path / 'beam' / 'out'}*"))
    assert shards == summary.output_files
    return (
        _records(str(tmp_path / "one.tfrecord"), compression),
        _records(shards, compression),
        summary,
    )


@pytest.mark.parametrize(
    "flags",
    [
        {},
        {"objective": "mlm", "do_whole_word_mask": True},
        {"objective": "ltr", "output_compression": "gzip"},
    ],
    ids=["mlm_nsp", "mlm_whole_words", "ltr_gzip"],
)
def test_the_beam_shards_hold_exactly_the_one_machine_records(corpus, tmp_path, flags):
    one_machine, beam, summary = _one_machine_and_beam(corpus, tmp_path, **flags)
    assert sum(one_machine.values()) > 1000
    assert beam == one_machine
    assert summary.instances == sum(beam.values())
    assert [os.path.basename(path) for path in summary.output_files] == [
        f"out-{k:05d}-of-00003" for k in range(3)
    ]
    compression = "GZIP" if flags.get("output_compression") else ""
    assert all(_records(path, compression) for path in summary.output_files)  # none empty


def test_skipped_invalid_lines_are_skipped_alike(corpus, tmp_path):
    text = (corpus / "austen-0.txt").read_bytes()
    cut = text.index(b"\n", len(text) // 2) + 1
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "bad.txt").write_bytes(text[:cut] + b"caf\xe9 au lait\n" + text[cut:])
    (mixed / "good.txt").write_bytes((corpus / "austen-1.txt").read_bytes())
    one_machine, beam, summary = _one_machine_and_beam(mixed, tmp_path, skip_invalid_utf8=True)
    assert beam == one_machine
    assert summary.skipped_invalid_lines == 1


def test_run_pretraining_reads_the_shards_through_their_glob(corpus, tmp_path):
    (tmp_path / "beam").mkdir()
    prefix = tmp_path / "beam" / "records"
    summary = create_pretraining_data.run(
        _config(
            corpus / "sample.txt", prefix, beam_pipeline_options=TWO_PROCESSES, num_output_shards=2
        )
    )
    dataset = reader.make_pretraining_dataset(f"{prefix}*", 1, SEQ, PREDICTIONS, is_training=False)
    assert sum(1 for _ in dataset) == summary.instances
    trainer = run_pretraining.run(
        PretrainingSettings(
            bert_config_file=str(SAMPLE_DIR / "bert_config_tiny.json"),
            input_file=f"{prefix}*",
            output_dir=str(tmp_path / "model"),
            max_seq_length=SEQ,
            max_predictions_per_seq=PREDICTIONS,
            train_batch_size=4,
            num_train_steps=2,
            num_warmup_steps=1,
            save_checkpoints_steps=2,
            do_train=True,
        )  # fmt: skip
    )
    assert int(trainer.optimizer.iterations.numpy()) == 2


def test_the_local_runner_is_the_fn_api_runner_and_prism_is_never_tried(monkeypatch):
    from apache_beam.runners.portability import prism_runner
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    def no_download(*args, **kwargs):
        raise AssertionError("Prism was tried: it downloads its binary at run time")

    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", no_download)
    for text in (TWO_PROCESSES, "", "direct_num_workers=1"):
        assert isinstance(pipeline.make_pipeline(pipeline.parse_options(text)).runner, FnApiRunner)
    beam = pipeline.import_beam()
    counted = pipeline.make_pipeline(pipeline.parse_options("runner=DirectRunner"))
    _ = counted | beam.Create([1, 2, 3]) | beam.Map(lambda x: x)
    pipeline.run(counted)


@pytest.mark.parametrize(
    "options, message",
    [
        ("runner=DirectRunner,direct_num_worker=2", "unknown option 'direct_num_worker'"),
        ("direct_num_workers=two", "a value is not valid"),
        ("save_main_session=maybe", "save_main_session is a switch"),
    ],
)
def test_bad_pipeline_options_are_one_line_errors(options, message):
    with pytest.raises(InputError, match=message):
        pipeline.parse_options(options)


def _refused_before_submission(monkeypatch, config, message):
    def never(*args):
        raise AssertionError("the pipeline was built before the input was checked")

    monkeypatch.setattr(pipeline, "make_pipeline", never)
    with pytest.raises(InputError, match=message) as raised:
        create_pretraining_data.run(config)
    assert "\n" not in str(raised.value)


def test_bad_input_is_refused_before_the_pipeline_is_submitted(corpus, tmp_path, monkeypatch):
    (tmp_path / "bad.txt").write_bytes(b"good line\n\nanother\n\xff\xfe broken\n")
    cases = [
        (_config(tmp_path / "none-*.txt", tmp_path / "o"), r"--input_file=.*none-\*\.txt: no file"),
        (_config(tmp_path / "bad.txt", tmp_path / "o"), r"bad\.txt:4: not valid UTF-8"),
        (_config(corpus / "sample.txt", tmp_path / "no" / "o"), "the folder .* does not exist"),
        (_config(corpus / "sample.txt", f"{tmp_path}/a,{tmp_path}/b"), "one prefix"),
    ]
    for config, message in cases:
        config.beam_pipeline_options = TWO_PROCESSES
        _refused_before_submission(monkeypatch, config, message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt"]


def test_a_workers_error_reaches_the_user_as_one_line_and_leaves_the_old_shards(
    corpus, tmp_path, monkeypatch
):
    prefix = tmp_path / "out"
    create_pretraining_data.run(
        _config(
            corpus / "sample.txt", prefix, beam_pipeline_options=TWO_PROCESSES, num_output_shards=2
        )
    )
    before = {path: open(path, "rb").read() for path in glob.glob(f"{prefix}*")}
    assert len(before) == 2
    # A remote file is checked by the worker that reads it: here a local one, unchecked up front.
    (tmp_path / "bad.txt").write_bytes(b"first line\n\nsecond\n\xff broken\n")
    monkeypatch.setattr(pretraining_data.file_io, "check_utf8", lambda path: None)
    with pytest.raises(InputError) as raised:
        create_pretraining_data.run(
            _config(
                f"{corpus / 'sample.txt'},{tmp_path / 'bad.txt'}",
                prefix,
                beam_pipeline_options=TWO_PROCESSES,
                num_output_shards=3,
            )
        )
    assert str(raised.value).startswith(f"{tmp_path / 'bad.txt'}:4: not valid UTF-8")
    assert "\n" not in str(raised.value)
    assert {path: open(path, "rb").read() for path in glob.glob(f"{prefix}*")} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "bad.txt",
        *sorted(map(os.path.basename, before)),
    ]


def test_a_rerun_with_fewer_shards_leaves_only_its_own(corpus, tmp_path):
    prefix = tmp_path / "out"
    for num_shards in (3, 2):
        summary = create_pretraining_data.run(
            _config(
                corpus / "sample.txt",
                prefix,
                beam_pipeline_options=TWO_PROCESSES,
                num_output_shards=num_shards,
            )
        )
    assert sorted(glob.glob(f"{prefix}*")) == summary.output_files
    assert sum(_records(summary.output_files).values()) == summary.instances


def test_the_command_line_gives_one_line_for_a_bad_option(tmp_path):
    result = subprocess.run(
        [
            sys.executable, str(REPO_DIR / "create_pretraining_data.py"),
            f"--input_file={SAMPLE_DIR / 'sample_text.txt'}", f"--output_file={tmp_path / 'o'}",
            f"--vocab_file={SAMPLE_DIR / 'vocab.txt'}", "--beam_pipeline_options=runner=DirectRunner,numworkers=2",
        ],
        capture_output=True, text=True, env=SUBPROCESS_ENV, timeout=300,
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "error: --beam_pipeline_options: unknown option 'numworkers' "
        "(not a pipeline option of Beam or of its runners)"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_readmes_pipeline_options_are_beams_own():
    # The Dataflow (README), Flink and Spark (docs/beam.md) commands are not run here: their options
    # must at least be options of Beam and of those runners, with valid values.
    text = "".join(
        (REPO_DIR / page).read_text(encoding="utf-8") for page in ("README.md", "docs/beam.md")
    )
    found = re.findall(r"--beam_pipeline_options=(\S+)", text)
    runners = set()
    for text in found:
        options = pipeline.parse_options(re.sub(r"\$[A-Z_]+", "x", text))
        runners.add(options.get_all_options()["runner"])
    assert {"DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner"} <= runners
