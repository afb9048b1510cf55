"""batch_predict.py and bert_tf.beam's RunInference handler: every export kind, on Beam's DirectRunner.

The reference for every row is a direct call of the export's serving_default on that row alone, in
this process (what a server answers). The pipelines run with two worker processes
(direct_running_mode=multi_processing); every export is a random tiny model (2 layers, hidden 32)
whose weights are large enough (initializer_range 0.2) that rows' outputs differ by far more than
the tolerance, so a row given another row's outputs fails.
"""

import glob
import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.beam import batch_prediction, pipeline
from bert_tf.beam.inference import ExportModelHandler
from bert_tf.errors import InputError
from bert_tf.modeling import BertConfig
from bert_tf.models.networks.task_info import TaskInfo
from bert_tf.tasks import TASKS

from conftest import REPO_DIR, SAMPLE_DIR, SUBPROCESS_ENV

VOCAB = str(SAMPLE_DIR / "vocab.txt")
MULTI_PROCESS = "runner=DirectRunner,direct_num_workers=2,direct_running_mode=multi_processing"
ATOL = 1e-5  # the tolerance; float32 rows differ by ~1e-7 when padded otherwise
CONFIG = dict(
    vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=64, max_position_embeddings=128, initializer_range=0.2,
)  # fmt: skip
TEXTS = [
    "Emma Woodhouse, handsome, clever, and rich.",
    "",
    "The real evils, indeed, of Emma's situation were the power of having rather too much her own "
    "way, and a disposition to think a little too well of herself.",  # several windows of 24
    "Café naïve — “quoted” 東京!\u2003Mr.\u3000Knightley",
    "Yes.",
    "She was the youngest of the two daughters of a most affectionate, indulgent father.",
]
TEXTS_B = ["She was the youngest.", "Who?", "", "x", "Highbury and Hartfield", "a b c d e f"]
QUESTIONS = ["Who was rich?", "", "Whose evils?", "東京?", "Who?", "What was she?"]
CHOICES = [["She smiled.", "He left."], ["", "x", "Hartfield"], ["a", "b"], TEXTS_B[:4]]
# kind: (model type, its TaskInfo settings, the rows its signature takes)
KINDS = {
    "classifier": (
        "classifier",
        dict(labels=["neg", "pos", "mixed"]),
        [{"text_a": t} for t in TEXTS],
    ),
    "classifier_pair": (
        "classifier",
        dict(labels=["entailment", "neutral", "contradiction"], is_pair=True),
        [{"text_a": a, "text_b": b} for a, b in zip(TEXTS, TEXTS_B, strict=True)],
    ),
    "classifier_windows": (
        "classifier",
        dict(labels=["neg", "pos"], doc_stride=8, window_combination="weighted_mean"),
        [{"text_a": t} for t in TEXTS],
    ),
    # Its thresholds are set between the rows' probabilities (`exports`).
    "multi_label": (
        "multi_label",
        dict(labels=["animal", "colour", "food"]),
        [{"text_a": t} for t in TEXTS],
    ),
    "squad": (
        "squad",
        dict(version_2_with_negative=True, doc_stride=8, max_query_length=8, n_best_size=5),
        [{"question": q, "context": c} for q, c in zip(QUESTIONS, TEXTS, strict=True)],
    ),
    "tagger": (
        "tagger",
        dict(labels=["O", "B-PER", "I-PER", "B-LOC"], doc_stride=6),
        [{"text": t} for t in TEXTS],
    ),
    "multiple_choice": (
        "multiple_choice",
        dict(),
        [{"context": TEXTS[i % len(TEXTS)], "choices": c} for i, c in enumerate(CHOICES * 2)],
    ),
    "encoder": ("encoder", dict(), [{"text_a": t} for t in TEXTS]),
}
# Written as TSV (the others as JSON lines); the tagger's has an extra column, which is ignored.
# An output of each kind that the export pads to the batch's longest row.
PADDED = {"tagger": "labels", "encoder": "sequence_output", "multi_label": "labels"}
TSV_KINDS = {"squad": ["context", "question"], "tagger": ["id", "text"]}


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """{kind: the folder TF Serving watches}: each kind's random tiny model, exported.

    The multi-label model is exported twice: version 2 with each label's threshold in the widest
    gap between the rows' probabilities (of version 1), so that rows get different numbers of
    labels, which the export pads with "" to the batch's most; batch_predict must use version 2.
    """
    folder = tmp_path_factory.mktemp("exports")
    config = BertConfig(**CONFIG)
    for seed, (kind, (model_type, settings, _)) in enumerate(KINDS.items()):
        common = dict(model_type=model_type, bert_config=config, max_seq_length=24)
        info = TaskInfo(**common, **settings)
        keras.utils.set_random_seed(seed)
        spec = TASKS[model_type]
        model = spec.build_model(config, info)
        model(model.dummy_inputs())
        path = spec.export_model(model, info, VOCAB, str(folder / kind))
        if kind == "multi_label":
            serve = tf.saved_model.load(path).signatures["serving_default"]
            probabilities = np.sort(serve(text_a=tf.constant(TEXTS))["probabilities"].numpy(), 0)
            widest = np.argmax(np.diff(probabilities, axis=0), axis=0)  # [L]
            thresholds = [float(probabilities[k : k + 2, j].mean()) for j, k in enumerate(widest)]
            info = TaskInfo(**common, **settings, thresholds=thresholds)
            spec.export_model(model, info, VOCAB, str(folder / kind))
    return {kind: str(folder / kind) for kind in KINDS}


@pytest.fixture(scope="module")
def signatures(exports):
    """{kind: the serving_default of its latest version}, loaded here for the direct calls."""
    return {
        kind: tf.saved_model.load(os.path.join(path, max(os.listdir(path)))).signatures[
            "serving_default"
        ]
        for kind, path in exports.items()
    }


def _direct(signature, row):
    """The signature called on `row` alone: {output name: numpy value of its only row}."""
    outputs = signature(**{name: tf.constant([value]) for name, value in row.items()})
    return {name: value.numpy()[0] for name, value in outputs.items()}


def _plain(value):
    """A numpy value, bytes or JSON value -> nested lists of str or numbers."""
    if isinstance(value, np.ndarray | np.generic):
        value = value.tolist()
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _assert_like_direct(outputs, reference, where):
    """Outputs (JSON values or numpy) equal the direct call's: the same names, strings exactly,
    numbers in the same shape to ATOL."""
    assert sorted(outputs) == sorted(reference), where
    for name, expected in reference.items():
        if np.asarray(expected).dtype.kind in "OS":
            assert _plain(outputs[name]) == _plain(expected), (where, name)
            continue
        actual, expected = np.asarray(outputs[name]), np.asarray(expected)
        if expected.size == 0:  # nested lists cannot say the shape of an empty array: []
            assert actual.size == 0 and _plain(actual) == _plain(expected), (where, name)
            continue
        assert actual.shape == expected.shape, (where, name, actual.shape, expected.shape)
        np.testing.assert_allclose(actual, expected, rtol=0, atol=ATOL, err_msg=f"{where} {name}")


def _write_rows(path, kind, rows):
    """Writes `rows` as TSV (TSV_KINDS) or JSON lines; returns {line number: row}."""
    if kind in TSV_KINDS:
        columns = TSV_KINDS[kind]
        lines = ["\t".join(columns)]
        lines += [
            "\t".join(row.get(c, f"extra {i}") for c in columns) for i, row in enumerate(rows)
        ]
        first = 2
    else:
        lines = [json.dumps({**row, "id": i}, ensure_ascii=False) for i, row in enumerate(rows)]
        first = 1
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {first + i: row for i, row in enumerate(rows)}


def _read_records(output_file):
    """{(input_file, line): record} of every output line under `output_file`*."""
    records = {}
    for path in sorted(glob.glob(output_file + "*")):
        with open(path, encoding="utf-8") as file:
            for line in file:
                record = json.loads(line)
                key = (record["input_file"], record["line"])
                assert key not in records, key
                records[key] = record
    return records


@pytest.fixture(scope="module")
def predicted(exports, tmp_path_factory):
    """One pipeline on 2 worker processes, a branch per export kind but the pair classifier's
    (test_batch_predict_writes_...): {kind: (rows by (input file, line), records by the same)}."""
    folder = tmp_path_factory.mktemp("predicted")
    options = pipeline.parse_options(MULTI_PROCESS)
    beam_pipeline = pipeline.make_pipeline(options)
    expected = {}
    for kind, (_, _, rows) in KINDS.items():
        if kind == "classifier_pair":
            continue
        path = folder / (f"{kind}.tsv" if kind in TSV_KINDS else f"{kind}.jsonl")
        expected[kind] = {(str(path), n): row for n, row in _write_rows(path, kind, rows).items()}
        # Small batches of mixed rows: padding differs between a row's batch and its direct call.
        handler = ExportModelHandler(exports[kind], min_batch_size=3, max_batch_size=4)
        batch_prediction.add_predictions(
            beam_pipeline, handler, [str(path)], str(folder / kind / "predictions"), label=kind
        )
    pipeline.run(beam_pipeline)
    return {
        kind: (rows, _read_records(str(folder / kind / "predictions")))
        for kind, rows in expected.items()
    }


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "classifier_pair"])
def test_runinference_outputs_equal_a_direct_call_of_the_export(kind, predicted, signatures):
    rows, records = predicted[kind]
    assert sorted(records) == sorted(rows)
    for key, row in rows.items():
        reference = _direct(signatures[kind], row)
        outputs = {k: v for k, v in records[key].items() if k not in ("input_file", "line")}
        _assert_like_direct(outputs, reference, f"{kind} {key}")


def test_batch_predict_writes_one_json_line_per_row_of_every_file(exports, signatures, tmp_path):
    # The pair classifier through run(), batch_predict.py's library: a TSV file (its columns in
    # another order, one extra) and a JSON lines file (a blank line, an extra key).
    rows = KINDS["classifier_pair"][2]
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text(
        "text_b\tid\ttext_a\n"
        + "".join(f"{r['text_b']}\t{i}\t{r['text_a']}\n" for i, r in enumerate(rows[:4])),
        encoding="utf-8",
    )
    jsonl = tmp_path / "more.jsonl"
    lines = [json.dumps({**row, "id": 7}, ensure_ascii=False) for row in rows[4:]]
    jsonl.write_text(f"{lines[0]}\n\n{lines[1]}\n", encoding="utf-8")
    output_file = str(tmp_path / "out" / "pairs")
    written = batch_prediction.run(
        batch_prediction.BatchPredictSettings(
            export_dir=exports["classifier_pair"],
            input_file=f"{tsv},{tmp_path}/*.jsonl",
            output_file=output_file,
            beam_pipeline_options=MULTI_PROCESS,
            min_batch_size=2,
        )
    )
    assert written and written == sorted(glob.glob(output_file + "*"))
    records = _read_records(output_file)
    expected = {(str(tsv), n + 2): row for n, row in enumerate(rows[:4])}
    expected.update({(str(jsonl), 1): rows[4], (str(jsonl), 3): rows[5]})
    assert sorted(records) == sorted(expected)
    for key, row in expected.items():
        record = records[key]
        assert list(record)[:2] == ["input_file", "line"]
        assert sorted(record) == ["input_file", "label", "line", "probabilities"]
        outputs = {k: v for k, v in record.items() if k not in ("input_file", "line")}
        _assert_like_direct(outputs, _direct(signatures["classifier_pair"], row), key)


@pytest.mark.parametrize("kind", ["tagger", "encoder", "multi_label", "multiple_choice", "squad"])
def test_a_rows_outputs_do_not_depend_on_its_batch(kind, exports, signatures):
    handler = ExportModelHandler(exports[kind])
    model = handler.load_model()
    rows = KINDS[kind][2]
    results = handler.run_inference(rows, model)
    if kind in PADDED:  # the batch pads some rows: the cut is exercised
        lengths = {len(result.inference[PADDED[kind]]) for result in results}
        assert len(lengths) > 1, lengths
    assert [result.example for result in results] == rows
    for index, (row, result) in enumerate(zip(rows, results, strict=True)):
        _assert_like_direct(result.inference, _direct(signatures[kind], row), f"{kind} {index}")


# Run as a worker runs it: the export loaded by tf.saved_model.load. `import bert_tf` registers the
# Keras models (so that load_model finds them), but no run, training loop or task code is loaded.
_LOAD_AS_A_WORKER = textwrap.dedent(
    """
    import json, sys
    from bert_tf.beam.inference import ExportModelHandler
    handler = ExportModelHandler(sys.argv[1])
    results = handler.run_inference(json.loads(sys.argv[2]), handler.load_model())
    ours = sorted(m for m in sys.modules if m.startswith("bert_tf"))
    assert "bert_tf.beam.inference" in ours, ours
    assert not [m for m in ours if m.startswith(("bert_tf.tasks", "bert_tf.training"))], ours
    print(json.dumps([result.inference["word_count"].tolist() for result in results]))
    """
)


def test_the_handler_loads_an_export_without_the_model_code(exports, signatures):
    rows = KINDS["tagger"][2]
    result = subprocess.run(
        [sys.executable, "-c", _LOAD_AS_A_WORKER, exports["tagger"], json.dumps(rows)],
        capture_output=True, text=True, timeout=300, env=SUBPROCESS_ENV,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    word_counts = json.loads(result.stdout.strip().splitlines()[-1])
    assert word_counts == [int(_direct(signatures["tagger"], row)["word_count"]) for row in rows]


def _config(exports, tmp_path, **changes):
    settings = dict(
        export_dir=exports["classifier_pair"],
        input_file=str(tmp_path / "*.tsv"),
        output_file=str(tmp_path / "out" / "predictions"),
        beam_pipeline_options=MULTI_PROCESS,
    )
    return batch_prediction.BatchPredictSettings(**{**settings, **changes})


def _no_output(tmp_path):
    """Nothing under the output prefix, and no temporary folder of Beam's left beside it."""
    return not glob.glob(str(tmp_path / "out" / "predictions*")) and not glob.glob(
        str(tmp_path / "out" / "beam-temp-*")
    )


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            dict(input_file="{tmp}/nothing*.tsv"),
            "--input_file={tmp}/nothing*.tsv: no file matches it",
        ),
        (
            dict(beam_pipeline_options="runner=DirectRunner,direct_num_worker=2"),
            "--beam_pipeline_options: unknown option 'direct_num_worker'",
        ),
        (dict(export_dir="{tmp}"), "--export_dir={tmp}: no SavedModel"),
        (dict(input_file="{tmp}/a.tsv"), "{tmp}/a.tsv:1: the header has no column 'text_b'"),
        (
            dict(input_file="{tmp}/a.txt"),
            "--input_file: {tmp}/a.txt: its extension names no format",
        ),
    ],
    ids=["no_file_matches", "unknown_option", "no_saved_model", "missing_column", "unknown_format"],
)
def test_bad_settings_are_refused_in_one_line_before_submission(
    changes, message, exports, tmp_path, monkeypatch
):
    (tmp_path / "a.tsv").write_text("text_a\tid\nHello\t1\n")
    (tmp_path / "a.txt").write_text("text_a\ttext_b\nHello\tWorld\n")
    monkeypatch.setattr(pipeline, "run", lambda _: pytest.fail("the pipeline was submitted"))
    changes = {name: value.format(tmp=tmp_path) for name, value in changes.items()}
    with pytest.raises(InputError) as error:
        batch_prediction.run(_config(exports, tmp_path, **changes))
    assert str(error.value).startswith(message.format(tmp=tmp_path)), str(error.value)
    assert "\n" not in str(error.value)
    assert _no_output(tmp_path)


def _good_rows(count):
    return "text_a\ttext_b\n" + "".join(f"{TEXTS[i % 6]}\t{TEXTS_B[i % 6]}\n" for i in range(count))


def test_a_row_missing_a_column_stops_the_run_with_its_file_and_line(exports, tmp_path):
    (tmp_path / "good.tsv").write_text(_good_rows(40), encoding="utf-8")
    (tmp_path / "short.tsv").write_text(_good_rows(5) + "only text_a\n", encoding="utf-8")
    with pytest.raises(InputError) as error:
        batch_prediction.run(_config(exports, tmp_path))
    short = tmp_path / "short.tsv"
    assert str(error.value) == f"{short}:7: 1 column(s), but the header names 2"
    assert _no_output(tmp_path)


def test_invalid_json_stops_the_script_with_one_line_naming_file_and_line(exports, tmp_path):
    (tmp_path / "good.tsv").write_text(_good_rows(40), encoding="utf-8")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text_a": "a", "text_b": "b"}\n\n{"text_a": "a", "text_b": }\n')
    result = subprocess.run(
        [
            sys.executable, os.path.join(REPO_DIR, "batch_predict.py"),
            f"--export_dir={exports['classifier_pair']}", f"--input_file={tmp_path}/*",
            f"--output_file={tmp_path}/out/predictions", f"--beam_pipeline_options={MULTI_PROCESS}",
        ],
        capture_output=True, text=True, timeout=300, env=SUBPROCESS_ENV,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last == f"error: {bad}:3: not valid JSON (column 27: Expecting value)", result.stderr
    assert "Traceback" not in result.stderr
    assert _no_output(tmp_path)
