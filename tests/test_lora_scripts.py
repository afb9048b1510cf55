"""run_*.py --lora_rank: adapters on a frozen base in the scripts, their file, resume and exports.

The base is the original TF1 code's tiny checkpoint (tests/fixtures/google_ckpt_tiny); the references
are that checkpoint's own tensors (the frozen weights), numpy's W + A @ B (the merged kernels) and the
run's test_results.tsv (what every export and rebuild must answer).
"""

import functools
import json
import os
import random
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import adapters
from bert_tf.checkpoints import restore_init_checkpoint
from bert_tf.errors import InputError
from bert_tf.models.networks.task_info import read_task_info
from bert_tf.tasks import get_task, run_script
from bert_tf.tasks.classification.task import SPEC, ClassifierSettings
from bert_tf.tasks.exporting import ExportSettings, export_checkpoint
from bert_tf.tasks.finetuning import LORA_FILE
from bert_tf.tokenization import FullTokenizer
from bert_tf.training.checkpoint_state import CheckpointState

from conftest import FIXTURES_DIR, PROBABILITY_ATOL, REPO_DIR, SUBPROCESS_ENV, W_WORDS

BASE = str(FIXTURES_DIR / "google_ckpt_tiny" / "bert_model.ckpt")
BASE_CONFIG = str(FIXTURES_DIR / "google_ckpt_tiny" / "bert_config.json")
POSITIVE, NEGATIVE, FILLER = W_WORDS[:4], W_WORDS[4:8], W_WORDS[20:60]

run = functools.partial(run_script, SPEC)


def _write_data(data_dir, sizes=(("train", 128), ("dev", 16), ("test", 24)), seed=0):
    rng = random.Random(seed)
    os.makedirs(data_dir, exist_ok=True)
    sentences = {}
    for split, size in sizes:
        lines = []
        for _ in range(size):
            label = rng.choice(["pos", "neg"])
            words = rng.sample(FILLER, 6) + [rng.choice(POSITIVE if label == "pos" else NEGATIVE)]
            rng.shuffle(words)
            sentence = " ".join(words)
            sentences.setdefault(split, []).append(sentence)
            lines.append(sentence if split == "test" else f"{sentence}\t{label}")
        (data_dir / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return sentences


def _config(root, vocab, **overrides):
    values = dict(
        bert_config_file=BASE_CONFIG, vocab_file=vocab, init_checkpoint=BASE,
        output_dir=str(root / "out"), task_name="tsv", data_dir=str(root / "data"),
        text_a_column="0", label_column="1", max_seq_length=16, train_batch_size=16,
        eval_batch_size=8, predict_batch_size=8, learning_rate=1e-2, num_train_epochs=2.0,
        iterations_per_loop=4, log_steps=4, save_checkpoints_steps=4, seed=3, lora_rank=2,
    )  # fmt: skip
    values.update(overrides)
    return ClassifierSettings(**values)


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory, w_vocab_file):
    root = tmp_path_factory.mktemp("lora_classifier")
    sentences = _write_data(root / "data")
    config = _config(
        root, w_vocab_file, do_train=True, do_predict=True, export_dir=str(root / "export")
    )
    outcome = run(config)
    rows = (root / "out" / "test_results.tsv").read_text().splitlines()
    probabilities = np.array([[float(p) for p in row.split("\t")] for row in rows])
    return {"root": root, "config": config, "outcome": outcome, "sentences": sentences,
            "probabilities": probabilities}  # fmt: skip


def _checkpoint_values(prefix):
    return {
        name: tf.train.load_variable(prefix, name) for name, _ in tf.train.list_variables(prefix)
    }


def _model_weights(out, prefix, lora_rank=2):
    """{weight path: value} of the run's model read from its checkpoint by object graph."""
    info = read_task_info(str(out))
    model = get_task("classifier").build_model(info.bert_config, info)
    model(model.dummy_inputs(), training=False)
    if lora_rank:
        model.bert.enable_lora(lora_rank)
    tf.train.Checkpoint(model=model).read(prefix).expect_partial().assert_existing_objects_matched()
    return {v.path.split("/", 1)[1]: v.numpy() for v in model.weights}


def test_the_base_stays_frozen_and_only_the_adapters_and_the_head_train(lora_run):
    out = lora_run["root"] / "out"
    prefix = tf.train.latest_checkpoint(str(out))
    trained = _model_weights(out, prefix)
    base = _checkpoint_values(BASE)
    pairs = {
        "bert/layer_1/attention/query/kernel": "layer_1/attention/self/query/kernel",
        "bert/layer_1/attention/query/bias": "layer_1/attention/self/query/bias",
        "bert/layer_0/intermediate/kernel": "layer_0/intermediate/dense/kernel",
        "bert/layer_0/output_LayerNorm/gamma": "layer_0/output/LayerNorm/gamma",
    }
    for ours, google in pairs.items():
        np.testing.assert_array_equal(trained[ours], base[f"bert/encoder/{google}"])
    lora_b = [v for k, v in trained.items() if k.endswith("lora_kernel_b")]
    assert len(lora_b) == 4  # 2 blocks x query, value
    assert all(np.abs(b).max() > 1e-4 for b in lora_b)  # B starts at zero: the adapters trained
    slots = [k for k, _ in tf.train.list_variables(prefix) if k.startswith("optimizer/_variables/")]
    assert len(slots) == 2 * (4 * 2 + 2)  # Adam's m and v of A and B of 4 projections and the head


def _test_ids(lora_run):
    """(input_ids, input_mask) [N, 16] of the run's test sentences, by the Python tokenizer."""
    tokenizer = FullTokenizer(lora_run["config"].vocab_file, do_lower_case=True)
    ids = np.zeros((len(lora_run["sentences"]["test"]), 16), np.int32)
    mask = np.zeros_like(ids)
    for row, sentence in enumerate(lora_run["sentences"]["test"]):
        tokens = ["[CLS]", *tokenizer.tokenize(sentence), "[SEP]"]
        ids[row, : len(tokens)] = tokenizer.convert_tokens_to_ids(tokens)
        mask[row, : len(tokens)] = 1
    return ids, mask


def test_the_base_plus_the_lora_file_rebuilds_the_trained_model(lora_run):
    out = lora_run["root"] / "out"
    assert (out / LORA_FILE).exists()
    info = read_task_info(str(out))
    model = get_task("classifier").build_model(info.bert_config, info)
    restore_init_checkpoint(model, BASE)  # the base: a fresh head
    model.bert.enable_lora(2)
    adapters.load_task_lora_file(
        str(out / LORA_FILE), model.bert, adapters.head_variables(model, model.bert)
    )
    ids, mask = _test_ids(lora_run)
    outputs = model({"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)})
    np.testing.assert_allclose(
        outputs["probabilities"], lora_run["probabilities"], rtol=0, atol=PROBABILITY_ATOL
    )


def test_a_lora_file_of_another_base_is_refused(lora_run, tmp_path):
    info = read_task_info(str(lora_run["root"] / "out"))
    model = get_task("classifier").build_model(info.bert_config, info)
    model(model.dummy_inputs(), training=False)  # random weights: not the base
    model.bert.enable_lora(2)
    with pytest.raises(ValueError, match="another base"):
        adapters.load_task_lora_file(
            str(lora_run["root"] / "out" / LORA_FILE),
            model.bert,
            adapters.head_variables(model, model.bert),
        )


_SERVE = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer ops)
    assert "bert_tf" not in sys.modules
    model = tf.saved_model.load(sys.argv[1])
    out = model.signatures["serving_default"](text_a=tf.constant(json.loads(sys.argv[2])))
    names = sorted(v.name for v in model.signatures["serving_default"].variables)
    print(json.dumps({"probabilities": out["probabilities"].numpy().tolist(), "names": names}))
    """
)


def _serve(export_path, sentences):
    result = subprocess.run(
        [sys.executable, "-c", _SERVE, str(export_path), json.dumps(sentences)],
        capture_output=True, text=True, timeout=300, env=SUBPROCESS_ENV,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _assert_serves_the_run(export_path, lora_run):
    served = _serve(export_path, lora_run["sentences"]["test"])
    assert not [name for name in served["names"] if "lora" in name]  # a plain model
    np.testing.assert_allclose(
        served["probabilities"], lora_run["probabilities"], rtol=0, atol=PROBABILITY_ATOL
    )


def test_the_run_s_export_is_merged_and_answers_like_test_results(lora_run):
    _assert_serves_the_run(lora_run["outcome"]["export"], lora_run)


def test_export_saved_model_of_the_run_dir_merges_the_adapters(lora_run, tmp_path):
    config = ExportSettings(
        init_checkpoint=str(lora_run["root"] / "out"),
        vocab_file=lora_run["config"].vocab_file,
        export_dir=str(tmp_path / "export"),
    )
    _assert_serves_the_run(export_checkpoint(config), lora_run)


class _Killed(Exception):
    pass


def test_a_killed_lora_run_resumes_to_bit_identical_weights(tmp_path, monkeypatch, w_vocab_file):
    _write_data(tmp_path / "data", sizes=(("train", 64), ("dev", 8), ("test", 4)))
    whole = _config(tmp_path, w_vocab_file, do_train=True, output_dir=str(tmp_path / "whole"))
    run(whole)
    killed = _config(tmp_path, w_vocab_file, do_train=True, output_dir=str(tmp_path / "killed"))
    save = CheckpointState.save

    def save_then_die_at_step_4(state, step, iterator=None):
        save(state, step, iterator)
        if step == 4:
            raise _Killed

    with monkeypatch.context() as patch:
        patch.setattr(CheckpointState, "save", save_then_die_at_step_4)
        with pytest.raises(_Killed):
            run(killed)
    run(killed)
    whole_prefix = tf.train.latest_checkpoint(str(tmp_path / "whole"))
    assert whole_prefix.endswith("ckpt-8")
    a = _model_weights(tmp_path / "whole", whole_prefix)
    b = _model_weights(tmp_path / "killed", tf.train.latest_checkpoint(str(tmp_path / "killed")))
    assert any(k.endswith("lora_kernel_a") for k in a)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    whole_file = np.load(tmp_path / "whole" / LORA_FILE)
    killed_file = np.load(tmp_path / "killed" / LORA_FILE)
    for name in whole_file.files:
        np.testing.assert_array_equal(whole_file[name], killed_file[name])


def test_resuming_without_the_run_s_lora_flags_is_one_line(lora_run, tmp_path):
    shutil.copytree(lora_run["root"] / "out", tmp_path / "out")
    shutil.copytree(lora_run["root"] / "data", tmp_path / "data")
    config = _config(tmp_path, lora_run["config"].vocab_file, do_train=True, lora_rank=0)
    with pytest.raises(InputError, match="--lora_rank"):
        run(config)


@pytest.mark.parametrize(
    "flags, message",
    [
        ({"lora_rank": -1}, "--lora_rank must be 0"),
        ({"lora_target_names": "query,attention"}, "--lora_target_names=query,attention"),
    ],
)
def test_bad_lora_flags_are_one_line_naming_the_flag(tmp_path, w_vocab_file, flags, message):
    _write_data(tmp_path / "data", sizes=(("train", 16), ("dev", 8), ("test", 4)))
    with pytest.raises(InputError, match=message):
        run(_config(tmp_path, w_vocab_file, do_train=True, **flags))
    assert not (tmp_path / "out" / "train.tf_record").exists()


def test_export_saved_model_py_given_only_the_run_dir_exports_the_run_quietly(lora_run, tmp_path):
    """A run dir is a whole model: vocab.txt, bert_config.json and task.json come from it."""
    result = subprocess.run(
        [sys.executable, str(REPO_DIR / "export_saved_model.py"),
         f"--init_checkpoint={lora_run['root'] / 'out'}", f"--export_dir={tmp_path / 'export'}"],
        capture_output=True, text=True, timeout=300, env=SUBPROCESS_ENV,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    lines = (result.stdout + result.stderr).splitlines()
    assert max(len(line) for line in lines) <= 300, max(lines, key=len)[:400]
    assert result.stdout.strip().splitlines()[-1] == str(tmp_path / "export" / "1")
    _assert_serves_the_run(tmp_path / "export" / "1", lora_run)


def test_run_classifier_predicts_from_the_run_dir_alone(lora_run, tmp_path):
    """--init_checkpoint=<run dir> without --vocab_file or --bert_config_file: the run's files,
    and the LoRA run's checkpoint read into a plain model (adapters merged) predicts like the run."""
    config = _config(
        lora_run["root"], None, init_checkpoint=str(lora_run["root"] / "out"),
        bert_config_file=None, output_dir=str(tmp_path / "predict"), do_predict=True, lora_rank=0,
    )  # fmt: skip
    run(config)
    assert config.vocab_file == str(lora_run["root"] / "out" / "vocab.txt")
    rows = (tmp_path / "predict" / "test_results.tsv").read_text().splitlines()
    probabilities = np.array([[float(p) for p in row.split("\t")] for row in rows])
    np.testing.assert_allclose(probabilities, lora_run["probabilities"], rtol=0, atol=2e-6)


def test_extract_features_takes_the_run_dir_s_vocab_and_config(lora_run, tmp_path):
    (tmp_path / "input.txt").write_text("w1 w2 w3\n")
    result = subprocess.run(
        [sys.executable, str(REPO_DIR / "extract_features.py"),
         f"--input_file={tmp_path / 'input.txt'}", f"--output_file={tmp_path / 'out.jsonl'}",
         f"--init_checkpoint={lora_run['root'] / 'out'}", "--max_seq_length=16", "--layers=-1"],
        capture_output=True, text=True, timeout=300, env=SUBPROCESS_ENV,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    line = json.loads((tmp_path / "out.jsonl").read_text().splitlines()[0])
    assert [f["token"] for f in line["features"]] == ["[CLS]", "w1", "w2", "w3", "[SEP]"]


def test_an_export_dir_that_is_a_file_is_one_line_naming_it(lora_run, tmp_path):
    (tmp_path / "export").write_text("not a folder")
    config = ExportSettings(
        init_checkpoint=str(lora_run["root"] / "out"), export_dir=str(tmp_path / "export")
    )
    with pytest.raises(InputError, match=r"--export_dir=.*export is a file"):
        export_checkpoint(config)
    with pytest.raises(InputError, match=r"--export_dir=.*export is a file"):
        run(_config(lora_run["root"], None, init_checkpoint=str(lora_run["root"] / "out"),
                    output_dir=str(tmp_path / "o"), do_predict=True, lora_rank=0,
                    export_dir=str(tmp_path / "export")))  # fmt: skip
    assert not (tmp_path / "o" / "predict.tf_record").exists()


def test_an_export_removes_the_leftovers_of_killed_exports_and_nothing_else(lora_run, tmp_path):
    export_dir = tmp_path / "export"
    leftovers = [export_dir / ".1.tmp-0123456789ab", export_dir / ".7.tmp-abcdefabcdef"]
    kept = [export_dir / ".x.tmp-0123456789ab", export_dir / ".1.tmp-0123", export_dir / "notes"]
    for path in leftovers + kept:
        (path / "variables").mkdir(parents=True)
    config = ExportSettings(
        init_checkpoint=str(lora_run["root"] / "out"), export_dir=str(export_dir)
    )
    assert export_checkpoint(config) == str(export_dir / "1")
    assert not any(path.exists() for path in leftovers)
    assert all(path.exists() for path in kept)


_SERVE_INT8 = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer ops)
    assert "bert_tf" not in sys.modules
    outputs, loaded = [], []
    for path in sys.argv[1:3]:
        loaded.append(tf.saved_model.load(path))
        signature = loaded[-1].signatures["serving_default"]
        out = signature(text_a=tf.constant(json.loads(sys.argv[3])))
        outputs.append({
            "int8": sum(v.dtype == tf.int8 for v in signature.variables),
            "outputs": {k: v.numpy().tolist() for k, v in out.items() if v.dtype != tf.string},
        })
    print(json.dumps(outputs))
    """
)


@pytest.mark.parametrize("model_type", ["classifier", "encoder"])
def test_quantize_int8_exports_int8_weights_that_answer_like_float32(
    lora_run, tmp_path, model_type
):
    paths = []
    for quantize in (None, "int8"):
        config = ExportSettings(
            init_checkpoint=str(lora_run["root"] / "out"), model_type=model_type,
            export_dir=str(tmp_path / str(quantize)), quantize=quantize,
        )  # fmt: skip
        paths.append(export_checkpoint(config))
    sentences = lora_run["sentences"]["test"] + lora_run["sentences"]["train"][:40]
    result = subprocess.run(
        [sys.executable, "-c", _SERVE_INT8, *paths, json.dumps(sentences)],
        capture_output=True, text=True, timeout=300, env=SUBPROCESS_ENV,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    plain, int8 = json.loads(result.stdout.strip().splitlines()[-1])
    assert plain["int8"] == 0
    assert int8["int8"] == 2 * 6 + 1  # the 6 Dense kernels of each block, the pooler's
    if model_type == "classifier":
        expected = np.array(plain["outputs"]["probabilities"])
        served = np.array(int8["outputs"]["probabilities"])
        # A 48-wide model rounds coarser than BERT-base: int8 moves a probability by up to ~0.06.
        np.testing.assert_allclose(served, expected, rtol=0, atol=0.1)
        # So a label can change only where float32 hesitates: every text whose top probability
        # leads the next by more than twice that bound keeps its label (most texts here).
        top_two = np.sort(expected, -1)[:, -2:]
        clear = top_two[:, 1] - top_two[:, 0] > 0.2
        assert clear.mean() >= 0.5
        assert (served.argmax(-1) == expected.argmax(-1))[clear].all()
    else:
        expected = np.array(plain["outputs"]["pooled_output"])
        served = np.array(int8["outputs"]["pooled_output"])
        cosine = (
            (served * expected).sum(-1)
            / np.linalg.norm(served, axis=-1)
            / np.linalg.norm(expected, axis=-1)
        )
        assert cosine.min() > 0.95 and np.median(cosine) > 0.99


@pytest.mark.parametrize(
    "flags, message",
    [
        ({"mixed_precision": "mixed_bfloat16"}, "drop --mixed_precision"),
        ({"freeze_weights": True}, "drop --freeze_weights"),
    ],
)
def test_quantize_int8_refuses_what_it_cannot_take_in_one_line(lora_run, tmp_path, flags, message):
    config = ExportSettings(
        init_checkpoint=str(lora_run["root"] / "out"), export_dir=str(tmp_path / "e"),
        quantize="int8", **flags,
    )  # fmt: skip
    with pytest.raises(InputError, match=message):
        export_checkpoint(config)
    assert not (tmp_path / "e").exists()


@pytest.mark.parametrize("make", ["missing", "file"])
def test_a_data_dir_that_is_no_folder_is_one_line_naming_it(tmp_path, make):
    from bert_tf.tasks.task_settings import MultipleChoiceSettings, TaggerSettings

    data_dir = tmp_path / "data"
    if make == "file":
        data_dir.write_text("x")
    for settings_class in (TaggerSettings, MultipleChoiceSettings):
        config = settings_class(
            bert_config_file=BASE_CONFIG, vocab_file=BASE_CONFIG, output_dir=str(tmp_path / "o"),
            data_dir=str(data_dir), do_train=True,
        )  # fmt: skip
        message = "no such folder" if make == "missing" else "is a file"
        with pytest.raises(InputError, match=rf"--data_dir=.*data(: | ){message}"):
            config.check()


@pytest.mark.parametrize("rates", [-1e-3, 0.0, float("nan"), (2e-5, -3e-5)])
def test_a_learning_rate_that_cannot_train_is_one_line_before_any_work(
    tmp_path, w_vocab_file, rates
):
    _write_data(tmp_path / "data", sizes=(("train", 16), ("dev", 8), ("test", 4)))
    config = _config(
        tmp_path, w_vocab_file, do_train=True, do_eval=True, learning_rate=rates, lora_rank=0
    )
    with pytest.raises(InputError, match="--learning_rate must be a positive, finite number"):
        config.check()
    with pytest.raises(InputError, match="--learning_rate must be a positive, finite number"):
        run(config)
    if not isinstance(rates, tuple):  # a sweep writes its shared features first (tasks/sweep.py)
        assert not (tmp_path / "out" / "train.tf_record").exists()


def test_hugging_face_conversion_of_the_run_dir_merges_the_adapters(lora_run, tmp_path):
    from safetensors.numpy import load_file
    from test_convert_out import hf_classifier_probabilities

    from bert_tf.formats.convert import ConvertSettings
    from bert_tf.formats.convert import run as convert

    convert(
        ConvertSettings(
            init_checkpoint=str(lora_run["root"] / "out"), output_dir=str(tmp_path / "hf")
        )
    )
    assert not [k for k in load_file(str(tmp_path / "hf" / "model.safetensors")) if "lora" in k]
    ids, mask = _test_ids(lora_run)
    probabilities = hf_classifier_probabilities(tmp_path / "hf", ids, np.zeros_like(ids), mask)
    np.testing.assert_allclose(probabilities, lora_run["probabilities"], rtol=0, atol=1e-5)
