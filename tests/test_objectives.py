"""The paper's pretraining ablations (§5.1, Table 5): --objective=mlm_nsp|mlm|ltr, data to export.

mlm: masked LM alone on one continuous segment; ltr: a left-to-right LM with a causal attention mask that
fine-tuning keeps, read from the checkpoint's bert_config.json.
"""

import dataclasses
import json
import math
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import run_pretraining
from bert_tf import tokenization
from bert_tf.checkpoints import restore_init_checkpoint
from bert_tf.data.pretraining import reader, writer
from bert_tf.errors import InputError
from bert_tf.modeling import BertConfig, BertModel, BertPretrainingModel, pretraining_loss
from bert_tf.tasks import run_script
from bert_tf.tasks.classification import task as classification
from bert_tf.tasks.classification.task import ClassifierSettings
from bert_tf.tasks.exporting import ExportSettings, export_checkpoint
from bert_tf.tasks.pretraining import PretrainingSettings, next_token_loss

from conftest import REPO_DIR, SAMPLE_DIR, SUBPROCESS_ENV

TINY_CONFIG = SAMPLE_DIR / "bert_config_tiny.json"
VOCAB = str(SAMPLE_DIR / "vocab.txt")
SEQ, PREDICTIONS = 32, 5


def _tiny_config(**overrides):
    values = dict(
        vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=16, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    return BertConfig(**{**values, **overrides})


def _write_records(text_path, output, objective):
    config = writer.CreateSettings(
        input_file=str(text_path), output_file=str(output), vocab_file=VOCAB,
        max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, dupe_factor=1, num_workers=1,
        chunk_bytes=4096, objective=objective,
    )  # fmt: skip
    writer.run(config)
    dataset = reader.make_pretraining_dataset(str(output), 1, SEQ, PREDICTIONS, is_training=False)
    return [{name: value.numpy()[0] for name, value in batch.items()} for batch in dataset]


def _document_id_strings(text_path):
    """Each document of the sample text as " id id ... " (tokenized here, independently of the writer)."""
    tokenizer = tokenization.FullTokenizer(VOCAB, do_lower_case=True)
    documents, current = [], []
    for line in open(text_path, encoding="utf-8"):
        if not line.strip():
            documents.append(current)
            current = []
            continue
        current.extend(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line.strip())))
    documents.append(current)
    return [" " + " ".join(map(str, ids)) + " " for ids in documents if ids], tokenizer.vocab


def _check_one_continuous_segment(example, documents, vocab):
    """[CLS] ids [SEP], segment ids 0, and the ids (masks undone) a contiguous run of one document."""
    length = int(example["input_mask"].sum())
    ids = example["input_ids"][:length].copy()
    for position, original, weight in zip(
        example["masked_lm_positions"],
        example["masked_lm_ids"],
        example["masked_lm_weights"],
        strict=True,
    ):
        if weight:
            ids[position] = original
    assert ids[0] == vocab["[CLS]"] and ids[-1] == vocab["[SEP]"]
    assert list(ids).count(vocab["[SEP]"]) == 1
    assert not example["segment_ids"].any()
    assert example["next_sentence_labels"][0] == 0
    run = " " + " ".join(map(str, ids[1:-1])) + " "
    assert any(run in document for document in documents), "not a contiguous run of one document"


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """mlm, ltr and mlm_nsp records of the sample text."""
    root = tmp_path_factory.mktemp("records")
    text = SAMPLE_DIR / "sample_text.txt"
    return {
        objective: (root / f"{objective}.tfrecord", _write_records(text, root / f"{objective}.tfrecord", objective))
        for objective in ("mlm", "ltr", "mlm_nsp")
    }  # fmt: skip


def test_mlm_records_are_one_continuous_masked_segment_without_random_next(records):
    documents, vocab = _document_id_strings(SAMPLE_DIR / "sample_text.txt")
    _, examples = records["mlm"]
    assert len(examples) > 50
    for example in examples:
        _check_one_continuous_segment(example, documents, vocab)
        assert example["masked_lm_weights"].sum() >= 1
    # The original objective's records of the same text do have a second segment and random nexts.
    _, pairs = records["mlm_nsp"]
    assert all(example["segment_ids"].any() for example in pairs)
    assert any(example["next_sentence_labels"][0] == 1 for example in pairs)


def test_ltr_records_are_one_continuous_segment_with_nothing_masked(records):
    documents, vocab = _document_id_strings(SAMPLE_DIR / "sample_text.txt")
    _, examples = records["ltr"]
    assert len(examples) > 50
    for example in examples:
        assert not example["masked_lm_weights"].any()
        assert vocab["[MASK]"] not in example["input_ids"]
        _check_one_continuous_segment(example, documents, vocab)


def _perturb_after(ids, position, rng, low=5, high=60):
    """`ids` with every id after `position` replaced by another one."""
    changed = ids.copy()
    shift = rng.integers(1, high - low, size=changed[:, position + 1 :].shape)
    changed[:, position + 1 :] = low + (changed[:, position + 1 :] - low + shift) % (high - low)
    return changed


@pytest.mark.parametrize("objective", ["ltr", "mlm_nsp"])
def test_a_causal_encoder_output_at_i_ignores_the_tokens_after_i(objective):
    keras.utils.set_random_seed(3)
    model = BertModel(_tiny_config(objective=objective, initializer_range=0.2))
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 60, size=(2, 12)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 9:] = 0  # padding too
    segments = np.zeros_like(ids)
    position = 5
    before = model({"input_ids": ids, "input_mask": mask, "segment_ids": segments})
    after = model(
        {
            "input_ids": _perturb_after(ids, position, rng),
            "input_mask": mask,
            "segment_ids": segments,
        }
    )
    for layer_before, layer_after in zip(
        before["encoder_outputs"], after["encoder_outputs"], strict=True
    ):
        left = np.abs(layer_before[:, : position + 1] - layer_after[:, : position + 1]).max()
        right = np.abs(layer_before[:, position + 1 :] - layer_after[:, position + 1 :]).max()
        assert right > 1e-2  # the later positions see their own changed tokens
        if objective == "ltr":
            assert left < 1e-5  # outputs of ~1: float32 rounding at most (the weights are 0)
        else:
            assert left > 1e-2  # bidirectional: every position sees the change
    if objective == "ltr":  # the pooler reads the last real token: [CLS] sees only itself
        last = before["sequence_output"].numpy()[[0, 1], [11, 8]]
        np.testing.assert_allclose(before["pooled_output"], model.pooler(last), atol=1e-6)


def _gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def test_ltr_loss_is_the_mean_next_token_nll_over_real_positions():
    keras.utils.set_random_seed(5)
    # Large initial weights: log-probs far from uniform, so a wrong target or weight shows.
    config = _tiny_config(objective="ltr", initializer_range=0.5)
    model = BertPretrainingModel(config)
    rng = np.random.default_rng(1)
    ids = rng.integers(5, 60, size=(3, 10)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    mask[2, 3:] = 0
    features = {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}
    outputs = model({**features, "masked_lm_positions": np.zeros([3, 1], np.int32)})
    assert "next_sentence_log_probs" not in outputs and "masked_lm_logits" not in outputs
    loss = next_token_loss(outputs, features)

    # numpy: the cls/predictions head at every position, its log-softmax, the next token's NLL.
    head = model.masked_lm
    hidden = (
        outputs["sequence_output"].numpy() @ head.transform.kernel.numpy()
        + head.transform.bias.numpy()
    )
    hidden = _gelu(hidden)
    mean, var = hidden.mean(-1, keepdims=True), hidden.var(-1, keepdims=True)
    hidden = (hidden - mean) / np.sqrt(
        var + 1e-12
    ) * head.layer_norm.gamma.numpy() + head.layer_norm.beta.numpy()
    logits = hidden @ model.bert.embeddings.word_embeddings.numpy().T + head.output_bias.numpy()
    log_probs = logits - logits.max(-1, keepdims=True)
    log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
    total, count = 0.0, 0
    for b in range(3):
        for i in range(int(mask[b].sum()) - 1):
            total -= log_probs[b, i, ids[b, i + 1]]
            count += 1
    assert count == 9 + 5 + 2
    assert log_probs.std(-1).min() > 1.0  # far from uniform: which token is the target matters
    expected = total / count
    # float32 sums of ~16 terms of ~4: ~1e-6 relative; a wrong shift, weight or denominator is far off.
    assert float(loss["loss"]) == pytest.approx(expected, rel=1e-4)
    assert float(loss["next_token_loss"]) == float(loss["loss"])


def test_mlm_loss_is_the_originals_masked_lm_loss_and_there_is_no_next_sentence_head(
    google_ckpt_dir, reference
):
    config = BertConfig.from_json_file(str(google_ckpt_dir / "bert_config.json"))
    config = dataclasses.replace(config, objective="mlm")
    model = BertPretrainingModel(config)
    report = restore_init_checkpoint(model, str(google_ckpt_dir / "bert_model.ckpt"))
    assert report.restored == ["encoder", "pretraining heads"]
    assert not [v.path for v in model.variables if "seq_relationship" in v.path]
    inputs = {name: reference[name] for name in ("input_ids", "input_mask", "segment_ids")}
    outputs = model({**inputs, "masked_lm_positions": reference["masked_lm_positions"]})
    assert "next_sentence_log_probs" not in outputs
    losses = pretraining_loss(outputs, reference)
    assert set(losses) == {"loss", "masked_lm_loss"}
    # The original TF1 model's masked-LM loss on these inputs (tests/fixtures/google_ckpt_tiny).
    assert float(losses["loss"]) == pytest.approx(float(reference["masked_lm_loss"]), rel=1e-5)


def _pretraining_flags(input_file, output_dir, objective, **overrides):
    values = dict(
        bert_config_file=str(TINY_CONFIG), input_file=str(input_file), output_dir=str(output_dir),
        max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, train_batch_size=4,
        eval_batch_size=4, learning_rate=1e-3, num_train_steps=3, num_warmup_steps=1,
        save_checkpoints_steps=3, iterations_per_loop=3, log_steps=3, max_eval_steps=2,
        do_train=True, do_eval=True, objective=objective,
    )  # fmt: skip
    values.update(overrides)
    return PretrainingSettings(**values)


def _read_results(path):
    return {
        key: float(value)
        for key, value in (line.split(" = ") for line in open(path).read().splitlines())
    }


@pytest.mark.slow
def test_mlm_pretraining_trains_the_masked_lm_alone(records, tmp_path):
    path, _ = records["mlm"]
    trainer = run_pretraining.run(_pretraining_flags(path, tmp_path / "out", "mlm"))
    assert not [v.path for v in trainer.model.variables if "seq_relationship" in v.path]
    results = _read_results(tmp_path / "out" / "eval_results.txt")
    assert set(results) == {
        "global_step", "loss", "masked_lm_accuracy", "masked_lm_loss", "masked_lm_perplexity",
    }  # fmt: skip
    # "loss" is the mean of the eval batches' losses, masked_lm_loss the mean over all masked
    # positions: they part as far as the batches hold different numbers of masked positions (4e-4
    # relative on other records of this text). A next-sentence term would add about ln 2 (7%).
    assert results["loss"] == pytest.approx(results["masked_lm_loss"], rel=5e-3)
    names = [name for name, _ in tf.train.list_variables(str(tmp_path / "out" / "bert_model.ckpt"))]
    assert "cls/predictions/output_bias" in names
    assert not [name for name in names if "seq_relationship" in name]
    assert json.loads((tmp_path / "out" / "bert_config.json").read_text())["objective"] == "mlm"


@pytest.fixture(scope="module")
def ltr_pretrained(records, tmp_path_factory):
    path, _ = records["ltr"]
    out = tmp_path_factory.mktemp("ltr") / "out"
    run_pretraining.run(_pretraining_flags(path, out, "ltr"))
    return out


def test_ltr_pretraining_records_the_objective_and_reports_next_token_metrics(ltr_pretrained):
    results = _read_results(ltr_pretrained / "eval_results.txt")
    assert set(results) == {
        "global_step", "loss", "next_token_accuracy", "next_token_loss", "next_token_perplexity",
    }  # fmt: skip
    assert results["loss"] == pytest.approx(results["next_token_loss"], rel=1e-4)
    # exp of the loss as eval_results.txt prints it (float32's ~8 digits: 1e-6 of a loss of ~10)
    assert results["next_token_perplexity"] == pytest.approx(
        np.exp(results["next_token_loss"]), rel=1e-5
    )
    recorded = json.loads((ltr_pretrained / "bert_config.json").read_text())
    google = json.loads(TINY_CONFIG.read_text())
    assert recorded == {**google, "objective": "ltr"}  # Google's keys unchanged, one key added
    assert (
        json.loads((ltr_pretrained / "task.json").read_text())["bert_config"]["objective"] == "ltr"
    )


def _write_tsv(data_dir):
    """train.tsv and dev.tsv of a small two-label task (`sentence<TAB>label`)."""
    data_dir.mkdir()
    words = "the lady walked to the house and said that she was happy sad".split()
    rng = np.random.default_rng(4)
    for split, size in (("train", 32), ("dev", 8)):
        lines = []
        for _ in range(size):
            label = rng.choice(["happy", "sad"])
            lines.append(" ".join([*rng.choice(words[:-2], 6), label]) + f"\t{label}")
        (data_dir / f"{split}.tsv").write_text("\n".join(lines) + "\n")


def _assert_causal(bert):
    """The same check as above, on an encoder built by some script."""
    rng = np.random.default_rng(2)
    ids = rng.integers(1000, 2000, size=(2, 10)).astype(np.int32)
    inputs = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    before = bert(inputs, training=False)["sequence_output"].numpy()
    after = bert({**inputs, "input_ids": _perturb_after(ids, 4, rng, 1000, 2000)}, training=False)
    after = after["sequence_output"].numpy()
    assert np.abs(before[:, :5] - after[:, :5]).max() < 1e-5
    assert np.abs(before[:, 5:] - after[:, 5:]).max() > 1e-3


def test_fine_tuning_and_export_keep_the_causal_mask_of_the_checkpoints_config(
    ltr_pretrained, tmp_path
):
    _write_tsv(tmp_path / "data")
    config = ClassifierSettings(
        bert_config_file=str(ltr_pretrained / "bert_config.json"), vocab_file=VOCAB,
        init_checkpoint=str(ltr_pretrained / "bert_model.ckpt"), output_dir=str(tmp_path / "out"),
        task_name="tsv", data_dir=str(tmp_path / "data"), text_a_column="0", label_column="1",
        max_seq_length=SEQ, train_batch_size=16, num_train_epochs=1.0, do_train=True,
        iterations_per_loop=2, log_steps=2, save_checkpoints_steps=2,
    )  # fmt: skip
    run_script(classification.SPEC, config)
    task = json.loads((tmp_path / "out" / "task.json").read_text())
    assert task["bert_config"]["objective"] == "ltr"
    # The fine-tuned classifier's encoder, as export_saved_model.py rebuilds it from the run's files.
    from bert_tf.models.networks.task_info import read_task_info
    from bert_tf.tasks import get_task

    info = read_task_info(str(tmp_path / "out"))
    model = get_task(info.model_type).build_model(info.bert_config, info)
    restore_init_checkpoint(model, str(tmp_path / "out"), heads="required")
    _assert_causal(model.bert)
    # The SavedModel export of the fine-tuned run's encoder: its serving graph is causal too.
    version = export_checkpoint(
        ExportSettings(
            init_checkpoint=str(tmp_path / "out"),
            export_dir=str(tmp_path / "encoder_export"),
            vocab_file=VOCAB,
            model_type="encoder",
        )  # fmt: skip
    )
    serve_ids = tf.saved_model.load(str(version)).signatures["serve_ids"]
    _assert_causal(
        lambda inputs, training: serve_ids(**{k: tf.constant(v) for k, v in inputs.items()})
    )

    # Misuse: the same checkpoints with the original bert_config.json (no causal attention).
    with pytest.raises(InputError) as error:
        run_script(
            classification.SPEC,
            ClassifierSettings(
                **{
                    **vars(config),
                    "bert_config_file": str(TINY_CONFIG),
                    "output_dir": str(tmp_path / "o2"),
                }
            ),
        )
    message = str(error.value)
    assert "\n" not in message
    assert str(ltr_pretrained / "bert_config.json") in message  # the config to pass instead
    assert str(TINY_CONFIG) in message
    with pytest.raises(InputError) as error:
        export_checkpoint(
            ExportSettings(
                init_checkpoint=str(tmp_path / "out"),
                export_dir=str(tmp_path / "export"),
                vocab_file=VOCAB,
                bert_config_file=str(TINY_CONFIG),
            )  # fmt: skip
        )
    message = str(error.value)
    assert "\n" not in message and str(TINY_CONFIG) in message
    assert str(tmp_path / "out") in message  # the run whose checkpoint says ltr
    assert not (tmp_path / "export").exists()


@pytest.mark.parametrize(
    ("objective", "records_objective"), [("ltr", "mlm"), ("mlm", "mlm_nsp"), ("mlm_nsp", "ltr")]
)
def test_pretraining_on_records_of_another_objective_is_a_one_line_error(
    records, tmp_path, objective, records_objective
):
    path, _ = records[records_objective]
    with pytest.raises(InputError) as error:
        run_pretraining.run(_pretraining_flags(path, tmp_path / "out", objective))
    message = str(error.value)
    assert "\n" not in message
    assert f"--objective={objective}" in message and f"--objective={records_objective}" in message
    assert str(path) in message
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_pretraining_with_a_config_recording_another_objective_is_a_one_line_error(
    ltr_pretrained, records, tmp_path
):
    path, _ = records["mlm_nsp"]
    flags = _pretraining_flags(
        path, tmp_path / "out", "mlm_nsp", bert_config_file=str(ltr_pretrained / "bert_config.json")
    )
    with pytest.raises(InputError) as error:
        run_pretraining.run(flags)
    assert "\n" not in str(error.value)
    assert "objective ltr" in str(error.value) and "--objective=mlm_nsp" in str(error.value)


def test_original_configs_load_and_are_written_without_the_objective_key(google_ckpt_dir):
    text = (google_ckpt_dir / "bert_config.json").read_text()
    config = BertConfig.from_json_file(str(google_ckpt_dir / "bert_config.json"))
    assert config.objective == "mlm_nsp" and not config.causal_attention
    assert json.loads(config.to_json_string()) == json.loads(text)
    with pytest.raises(ValueError, match="objective"):
        BertConfig.from_dict({**json.loads(text), "objective": "gpt"})


def test_both_scripts_take_the_flag_and_a_mismatch_is_one_error_line(tmp_path):
    records = tmp_path / "mlm.tfrecord"
    create = subprocess.run(
        [
            sys.executable, str(REPO_DIR / "create_pretraining_data.py"), "--objective=mlm",
            f"--input_file={SAMPLE_DIR / 'sample_text.txt'}", f"--output_file={records}",
            f"--vocab_file={VOCAB}", "--max_seq_length=32", "--max_predictions_per_seq=5",
            "--dupe_factor=1", "--num_workers=1",
        ],
        capture_output=True, text=True, env=SUBPROCESS_ENV, timeout=300,
    )  # fmt: skip
    assert create.returncode == 0, create.stderr[-2000:]
    pretrain = subprocess.run(
        [
            sys.executable, str(REPO_DIR / "run_pretraining.py"), "--objective=ltr",
            f"--input_file={records}", f"--output_dir={tmp_path / 'out'}",
            f"--bert_config_file={TINY_CONFIG}", "--max_seq_length=32",
            "--max_predictions_per_seq=5", "--do_train=True", "--num_train_steps=2",
        ],
        capture_output=True, text=True, env=SUBPROCESS_ENV, timeout=300,
    )  # fmt: skip
    assert pretrain.returncode == 1
    lines = [line for line in pretrain.stderr.splitlines() if line.startswith("error: ")]
    assert lines == [
        f"error: --objective=ltr, but --input_file {records} holds records of "
        "create_pretraining_data.py --objective=mlm: write them with --objective=ltr"
    ]
    assert "Traceback" not in pretrain.stderr
