"""The sentence-embedding task: pooling, the in-batch loss, the retrieval metrics, run_embedding.py end
to end (train, eval, predict, export) and its one-line errors for bad rows.

The end-to-end task is written here: an anchor names one of Jane Austen's people and a place, its
positive names that person's partner and the place's county. No word is shared, so a model retrieves
the positive only once it has learnt who goes with whom.
"""

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import InputError
from bert_tf.models.networks import embedder_network
from bert_tf.tasks import TASKS, run_script
from bert_tf.tasks.embedding import pairs as embedding_pairs
from bert_tf.tasks.embedding import task as embedding
from bert_tf.tasks.exporting import ExportSettings, export_checkpoint

from conftest import REPO_DIR, SAMPLE_DIR, SUBPROCESS_ENV

TINY_CONFIG = str(SAMPLE_DIR / "bert_config_tiny.json")
VOCAB = str(SAMPLE_DIR / "vocab.txt")
MAX_SEQ_LENGTH = 16
PARTNERS = {
    "emma": "knightley", "harriet": "martin", "jane": "churchill", "elinor": "ferrars",
    "marianne": "brandon", "fanny": "edmund", "anne": "wentworth", "catherine": "tilney",
}  # fmt: skip
COUNTIES = {
    "highbury": "surrey", "bath": "somerset", "london": "middlesex", "norland": "sussex",
    "mansfield": "northamptonshire", "kellynch": "devon", "pemberley": "derbyshire",
    "barton": "kent",
}  # fmt: skip


# ------------------------------------------------------------------------------- pooling and loss


def _numpy_pool(hidden, mask, pooling):
    mask = mask.astype(bool)
    if pooling == "cls":
        return hidden[:, 0]
    if pooling == "mean":
        return np.stack([h[m].mean(axis=0) for h, m in zip(hidden, mask, strict=True)])
    return np.stack([h[m].max(axis=0) for h, m in zip(hidden, mask, strict=True)])


@pytest.mark.parametrize("pooling", ["mean", "cls", "max"])
@pytest.mark.parametrize("normalize", [False, True])
def test_pooling_reads_real_tokens_only(pooling, normalize):
    rng = np.random.default_rng(0)
    hidden = rng.normal(size=[3, 5, 4]).astype(np.float32)
    hidden[1, 3:] = 100.0  # padding values that would show in a mean or a max
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]])
    expected = _numpy_pool(hidden, mask, pooling)
    if normalize:
        expected = expected / np.linalg.norm(expected, axis=1, keepdims=True)
    actual = embedder_network.pool(
        tf.constant(hidden), tf.constant(mask), pooling, normalize
    ).numpy()
    np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-6)


def _numpy_loss(embeddings, scale):
    """-log softmax over the candidates (all positives, then all negatives), in float64, summed."""
    vectors = embeddings / np.linalg.norm(embeddings, axis=-1, keepdims=True)
    total = 0.0
    for i, anchor in enumerate(vectors[:, 0]):
        candidates = [
            vectors[j, t] for t in range(1, vectors.shape[1]) for j in range(len(vectors))
        ]
        logits = scale * np.array([anchor @ c for c in candidates])
        total += np.log(np.sum(np.exp(logits - logits.max()))) + logits.max() - logits[i]
    return total


@pytest.mark.parametrize("num_texts", [2, 3])
def test_in_batch_negatives_loss_is_the_softmax_over_scaled_cosines(num_texts):
    rng = np.random.default_rng(num_texts)
    embeddings = rng.normal(size=[5, num_texts, 8]) * rng.uniform(0.5, 3, size=[5, num_texts, 1])
    loss = embedder_network.in_batch_negatives_loss(tf.constant(embeddings, tf.float32), 20.0)
    np.testing.assert_allclose(float(loss), _numpy_loss(embeddings, 20.0), rtol=1e-5)


def test_hard_negatives_join_the_candidates():
    rng = np.random.default_rng(3)
    pairs = rng.normal(size=[4, 2, 8])
    negatives = pairs[:, 1:2] + 0.01 * rng.normal(size=[4, 1, 8])  # close to the positives
    with_negatives = np.concatenate([pairs, negatives], axis=1)
    without = float(embedder_network.in_batch_negatives_loss(tf.constant(pairs, tf.float32), 20.0))
    harder = float(
        embedder_network.in_batch_negatives_loss(tf.constant(with_negatives, tf.float32), 20.0)
    )
    assert harder > without + 4 * 0.5  # each near-copy of a positive costs about log 2


# ---------------------------------------------------------------------------------------- metrics


def test_retrieval_metrics_are_the_hand_computed_ranks():
    # Unit vectors at angles (degrees); anchor i's own candidate is candidate i.
    angle = lambda degrees: [np.cos(np.radians(degrees)), np.sin(np.radians(degrees))]  # noqa: E731
    anchors = np.array([angle(0), angle(90), angle(180), angle(270)])
    candidates = np.array([angle(5), angle(120), angle(140), angle(270), angle(85)])
    # anchor 0 (0):   its own at 5 is the nearest                            -> rank 1
    # anchor 1 (90):  candidate 4 at 85 (5 away), then its own at 120 (30)   -> rank 2
    # anchor 2 (180): its own at 140 (40 away), then 120 (60 away)           -> rank 1
    # anchor 3 (270): its own at 270                                         -> rank 1
    results = embedder_network.retrieval_metrics(anchors, candidates)
    assert results["eval_recall@1"] == 0.75
    assert results["eval_recall@10"] == 1.0
    assert results["eval_mrr@10"] == pytest.approx((1 + 1 / 2 + 1 + 1) / 4)


def test_mrr_counts_nothing_past_rank_ten_and_ties_rank_by_index():
    anchors = np.array([[1.0, 0.0], [1.0, 0.0]])
    # Anchor 0: candidate 0 ties candidates 1..11 and is first by index -> rank 1; anchor 1: its
    # own (index 1) is tied with candidate 0 only before it -> rank 2. Twelve ahead -> rank 13.
    candidates = np.array([[1.0, 0.0]] * 12 + [[0.0, 1.0]])
    results = embedder_network.retrieval_metrics(anchors, candidates)
    assert results["eval_recall@1"] == 0.5
    assert results["eval_mrr@10"] == pytest.approx((1 + 1 / 2) / 2)
    far = np.array([[0.0, 1.0], [1.0, 0.0]] + [[1.0, 0.01 * i] for i in range(11)])
    results = embedder_network.retrieval_metrics(anchors[:1], far)  # 12 candidates ahead: rank 13
    assert results["eval_recall@10"] == 0.0 and results["eval_mrr@10"] == 0.0


# ------------------------------------------------------------------------------------- end to end


def _pairs(rng, count):
    rows = []
    for _ in range(count):
        person, place = rng.choice(sorted(PARTNERS)), rng.choice(sorted(COUNTIES))
        rows.append((f"{person} went to {place}.", f"{PARTNERS[person]} of {COUNTIES[place]}"))
    return rows


def write_pairs(data_dir, seed=0):
    """train.tsv (hard negatives: another county), dev.jsonl (every person-place pair once) and
    test.txt; returns the test texts."""
    rng = random.Random(seed)
    os.makedirs(data_dir, exist_ok=True)
    with open(os.path.join(data_dir, "train.tsv"), "w", encoding="utf-8") as f:
        for anchor, positive in _pairs(rng, 512):
            partner, county = positive.split(" of ")
            other = rng.choice(sorted(set(COUNTIES.values()) - {county}))
            f.write(f"{anchor}\t{positive}\t{partner} of {other}\n")
    dev = [
        (f"{person} went to {place}.", f"{PARTNERS[person]} of {COUNTIES[place]}")
        for person in sorted(PARTNERS)
        for place in sorted(COUNTIES)[:4]
    ]
    with open(os.path.join(data_dir, "dev.jsonl"), "w", encoding="utf-8") as f:
        for anchor, positive in dev:
            f.write(json.dumps({"anchor": anchor, "positive": positive}) + "\n")
    texts = ["emma went to bath.", "", "knightley of somerset", "a text of many words " * 9]
    with open(os.path.join(data_dir, "test.txt"), "w", encoding="utf-8") as f:
        f.write("".join(f"{text}\n" for text in texts))
    return texts


def embedding_config(data_dir, output_dir, **overrides):
    values = dict(
        bert_config_file=TINY_CONFIG, vocab_file=VOCAB, output_dir=str(output_dir),
        data_dir=str(data_dir), max_seq_length=MAX_SEQ_LENGTH, train_batch_size=32,
        eval_batch_size=16, predict_batch_size=8, learning_rate=2e-3, num_train_epochs=6.0,
        iterations_per_loop=1000, log_steps=1000, save_checkpoints_steps=1000, seed=3,
    )  # fmt: skip
    values.update(overrides)
    return embedding.EmbeddingSettings(**values)


def _read_results(path):
    return {key: float(value) for key, value in (line.split(" = ") for line in open(path))}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One train + eval + predict + export run, shared by the tests that read its outputs."""
    root = tmp_path_factory.mktemp("embedding")
    texts = write_pairs(root / "data")
    config = embedding_config(
        root / "data", root / "out", do_train=True, do_eval=True, do_predict=True,
        export_dir=str(root / "export"),
    )  # fmt: skip
    outcome = run_script(embedding.SPEC, config)
    return {"root": root, "outcome": outcome, "texts": texts}


@pytest.mark.slow
def test_fine_tuning_learns_to_retrieve_the_positive(trained):
    results = _read_results(trained["root"] / "out" / "eval_results.txt")
    assert set(results) == {
        "eval_recall@1", "eval_recall@10", "eval_mrr@10", "eval_loss", "global_step",
    }  # fmt: skip
    # 32 dev candidates: chance is recall@1 1/32 and MRR@10 about 0.09.
    assert results["eval_recall@1"] >= 0.5, results
    assert results["eval_mrr@10"] >= 0.6, results
    assert results["eval_recall@10"] >= results["eval_recall@1"]


@pytest.mark.slow
def test_eval_of_the_untrained_encoder_is_near_chance(trained, tmp_path):
    # The same dev set through fresh random weights (saved as a Google checkpoint): the fine-tuned
    # run must beat them by far.
    import keras

    from bert_tf.checkpoints import save_google_checkpoint
    from bert_tf.modeling import BertConfig, BertModel

    keras.utils.set_random_seed(3)
    model = BertModel(BertConfig.from_json_file(TINY_CONFIG))
    model(model.dummy_inputs())
    save_google_checkpoint(model, str(tmp_path / "init" / "bert_model.ckpt"))
    config = embedding_config(
        trained["root"] / "data", tmp_path / "out", do_eval=True,
        init_checkpoint=str(tmp_path / "init" / "bert_model.ckpt"),
    )  # fmt: skip
    before = run_script(embedding.SPEC, config)["eval"]
    after = _read_results(trained["root"] / "out" / "eval_results.txt")
    assert before["eval_mrr@10"] < 0.4 < after["eval_mrr@10"] - 0.2, (before, after)


@pytest.mark.slow
def test_test_results_hold_one_embedding_per_test_line(trained):
    lines = (trained["root"] / "out" / "test_results.tsv").read_text().splitlines()
    vectors = np.array([[float(v) for v in line.split("\t")] for line in lines])
    assert vectors.shape == (len(trained["texts"]), 64)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)  # normalized
    np.testing.assert_allclose(vectors, trained["outcome"]["predict"], atol=1e-7)


@pytest.mark.slow
def test_the_export_serves_the_runs_embeddings_from_raw_text(trained):
    export_dir = trained["root"] / "export"
    loaded = tf.saved_model.load(str(export_dir / "1"))
    served = loaded.signatures["serving_default"](text_a=tf.constant(trained["texts"]))
    assert served["embeddings"].dtype == tf.float32
    np.testing.assert_allclose(
        served["embeddings"].numpy(), trained["outcome"]["predict"], rtol=0, atol=1e-5
    )
    task = json.loads((trained["root"] / "out" / "task.json").read_text())
    assert task["model_type"] == "embedding"
    assert task["embedding"] == {"pooling": "mean", "normalize": True}


@pytest.mark.slow
def test_export_saved_model_rebuilds_the_runs_embedder_from_task_json(trained, tmp_path):
    path = export_checkpoint(
        ExportSettings(
            init_checkpoint=str(trained["root"] / "out"), export_dir=str(tmp_path), vocab_file=VOCAB
        )
    )
    loaded = tf.saved_model.load(path)
    served = loaded.signatures["serving_default"](text_a=tf.constant(trained["texts"]))
    np.testing.assert_allclose(
        served["embeddings"].numpy(), trained["outcome"]["predict"], rtol=0, atol=1e-5
    )


@pytest.mark.slow
def test_a_learning_rate_sweep_ranks_its_runs_by_dev_mrr(tmp_path):
    write_pairs(tmp_path / "data")
    config = embedding_config(
        tmp_path / "data", tmp_path / "sweep", do_train=True, do_eval=True,
        learning_rate=(1e-6, 2e-3), num_train_epochs=2.0,
    )  # fmt: skip
    outcome = run_script(embedding.SPEC, config)
    runs = outcome["runs"]
    assert len(runs) == 2 and {run["metric"] for run in runs.values()} == {"eval_mrr@10"}
    values = sorted(run["value"] for run in runs.values())
    assert outcome["best"]["value"] == values[-1] > values[0]
    assert outcome["best"]["settings"]["learning_rate"] == 2e-3
    task = json.loads((tmp_path / "sweep" / "best" / "task.json").read_text())
    assert task["model_type"] == "embedding"


def test_the_checkpoints_embedding_json_sets_the_pooling_unless_the_flags_do(tmp_path):
    from bert_tf.checkpoints import save_google_checkpoint
    from bert_tf.modeling import BertConfig, BertModel

    data = tmp_path / "data"
    write_pairs(data)
    model = BertModel(BertConfig.from_json_file(TINY_CONFIG))
    model(model.dummy_inputs())
    save_google_checkpoint(model, str(tmp_path / "release" / "bert_model.ckpt"))
    (tmp_path / "release" / "embedding.json").write_text('{"pooling": "cls", "normalize": false}')
    init = str(tmp_path / "release" / "bert_model.ckpt")
    run = embedding.EmbeddingRun(
        embedding_config(data, tmp_path / "out", do_train=True, init_checkpoint=init)
    )
    assert (run.task_info().settings.pooling, run.task_info().settings.normalize) == ("cls", False)
    run = embedding.EmbeddingRun(
        embedding_config(
            data, tmp_path / "out", do_train=True, init_checkpoint=init, pooling="max",
            normalize=True,
        )
    )  # fmt: skip
    assert (run.task_info().settings.pooling, run.task_info().settings.normalize) == ("max", True)
    assert (run.build_model().pooling, run.build_model().normalize) == ("max", True)
    run = embedding.EmbeddingRun(embedding_config(data, tmp_path / "out2", do_train=True))
    assert (run.task_info().settings.pooling, run.task_info().settings.normalize) == ("mean", True)


def test_registry_builds_an_embedder_with_the_encoders_names_only():
    from bert_tf.checkpoints import google_variable_names
    from bert_tf.modeling import BertConfig
    from bert_tf.models.networks.task_info import TaskInfo

    info = TaskInfo(model_type="embedding", pooling="cls", normalize=False)
    model = TASKS["embedding"].build_model(BertConfig.from_json_file(TINY_CONFIG), info)
    outputs = model({"input_ids": tf.constant([[[101, 2000, 102], [101, 2001, 102]]])})
    assert outputs["embeddings"].shape == (1, 2, 64)  # a row's texts stay stacked
    assert all(name.startswith("bert/") for name in google_variable_names(model))


# ------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("train.tsv", "a\tb\nc\n", r"train\.tsv:2: a row holds an anchor, a positive .* got 1"),
        ("train.tsv", "a\tb\tc\td\n", r"train\.tsv:1: .* got 4"),
        ("train.tsv", "a\tb\tc\nd\te\n", r"train\.tsv:2: 2 texts, but line 1 has 3"),
        ("train.tsv", "a\tb\n \tc\n", r"train\.tsv:2: the anchor is empty"),
        (
            "train.jsonl",
            '{"anchor": "a", "positive": "b"}\n{"anchor": "a"\n',
            r"jsonl:2: not valid",
        ),
        ("train.jsonl", '{"anchor": "a", "text": "b"}\n', r"train\.jsonl:1: a row needs"),
        ("train.jsonl", '{"anchor": "a", "positive": 3}\n', r"train\.jsonl:1: .* must be strings"),
        ("train.tsv", "\n\n", r"train\.tsv: no rows"),
    ],
)
def test_bad_rows_name_the_file_and_line(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=message):
        embedding_pairs.read_pairs_file(str(path))


def test_tsv_and_json_lines_read_the_same_rows(tmp_path):
    (tmp_path / "a.tsv").write_text("one\ttwo\tthree\nfour\tfive\tsix\n")
    rows = [
        {"anchor": "one", "positive": "two", "negative": "three"},
        {"anchor": "four", "positive": "five", "negative": "six"},
    ]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    tsv = embedding_pairs.read_pairs_file(str(tmp_path / "a.tsv"))
    jsonl = embedding_pairs.read_pairs_file(str(tmp_path / "a.jsonl"))
    assert [row.texts for row in tsv] == [row.texts for row in jsonl]
    assert [row.texts for row in tsv] == [["one", "two", "three"], ["four", "five", "six"]]


def test_run_embedding_py_reports_a_bad_row_in_one_line(tmp_path):
    data = tmp_path / "data"
    write_pairs(data)
    (data / "train.tsv").write_text("an anchor\ta positive\nno positive here\n")
    result = subprocess.run(
        [
            sys.executable, str(REPO_DIR / "run_embedding.py"), f"--data_dir={data}",
            f"--bert_config_file={TINY_CONFIG}", f"--vocab_file={VOCAB}",
            f"--output_dir={tmp_path / 'out'}", "--do_train", "--max_seq_length=16",
        ],
        capture_output=True, text=True, timeout=300, env=SUBPROCESS_ENV, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {data / 'train.tsv'}:2: a row holds an anchor"), last


# ------------------------------------------------------------------ a sentence-transformers folder


def _st_folder(tmp_path, modules, pooling, sentence_bert=None):
    modules = [
        {"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{kind}"}
        for i, (kind, path) in enumerate(modules)
    ]
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": false}')
    if sentence_bert is not None:
        (tmp_path / "sentence_bert_config.json").write_text(json.dumps(sentence_bert))
    return str(tmp_path)


def _modes(**true):
    modes = ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens")
    return {f"pooling_mode_{mode}": mode in true for mode in modes} | {
        "word_embedding_dimension": 64
    }


@pytest.mark.parametrize(
    "mode, pooling", [("cls_token", "cls"), ("max_tokens", "max"), ("mean_tokens", "mean")]
)
def test_a_sentence_transformers_folder_gives_its_pooling(tmp_path, mode, pooling):
    from bert_tf.formats.sentence_transformers_folder import sentence_transformers_settings
    from bert_tf.modeling import BertConfig

    folder = _st_folder(
        tmp_path, [("Transformer", ""), ("Pooling", "1_Pooling")], _modes(**{mode: True}),
        {"max_seq_length": 100, "do_lower_case": False},
    )  # fmt: skip
    settings = sentence_transformers_settings(folder, BertConfig.from_json_file(TINY_CONFIG))
    assert settings == {
        "pooling": pooling, "normalize": False, "max_seq_length": 100, "do_lower_case": False,
    }  # fmt: skip


@pytest.mark.parametrize(
    "modules, pooling, sentence_bert, message",
    [
        ([("Transformer", ""), ("Pooling", "1_Pooling"), ("Dense", "2_Dense")],
         _modes(mean_tokens=True), None, r"modules\.json: module 'Dense' is not supported"),
        ([("Transformer", ""), ("Pooling", "1_Pooling")],
         _modes(mean_sqrt_len_tokens=True), None, r"config\.json: pooling .* is not supported"),
        ([("Transformer", ""), ("Pooling", "1_Pooling")],
         _modes(mean_tokens=True, max_tokens=True), None, r"exactly one of"),
        ([("Transformer", ""), ("Normalize", "2_Normalize")],
         _modes(mean_tokens=True), None, r"needs exactly one Pooling module"),
        ([("Transformer", ""), ("Pooling", "1_Pooling")],
         _modes(mean_tokens=True), {"max_seq_length": 512}, r"max_seq_length=512 must be"),
        ([("Transformer", ""), ("Pooling", "1_Pooling")],
         _modes(mean_tokens=True), {"do_lower_case": True}, r"do_lower_case lower-cases"),
    ],
)  # fmt: skip
def test_what_this_bert_cannot_compute_is_refused(
    tmp_path, modules, pooling, sentence_bert, message
):
    from bert_tf.formats.sentence_transformers_folder import sentence_transformers_settings
    from bert_tf.modeling import BertConfig

    folder = _st_folder(tmp_path, modules, pooling, sentence_bert)
    with pytest.raises(ValueError, match=message):
        sentence_transformers_settings(folder, BertConfig.from_json_file(TINY_CONFIG))


def test_a_lora_run_trains_adapters_alone_and_its_exports_merge_them(tmp_path):
    """run_embedding.py --lora_rank: the embedder has no head; its adapters train, its run's and
    export_saved_model.py's exports serve the run's predictions as plain float32 weights."""
    texts = write_pairs(tmp_path / "data")
    config = embedding_config(
        tmp_path / "data", tmp_path / "out", do_train=True, do_predict=True, num_train_epochs=1.0,
        export_dir=str(tmp_path / "export"), lora_rank=2, lora_target_names="query,key,value",
    )  # fmt: skip
    outcome = run_script(embedding.SPEC, config)
    lora = np.load(tmp_path / "out" / "lora_weights.npz")
    assert not [name for name in lora.files if name.startswith("head/")]
    b_names = [name for name in lora.files if name.endswith("/b")]
    assert len(b_names) == 3 * json.loads(open(TINY_CONFIG).read())["num_hidden_layers"]
    assert all(np.abs(lora[name]).max() > 0 for name in b_names)  # B starts at zero
    again = export_checkpoint(
        ExportSettings(init_checkpoint=str(tmp_path / "out"), export_dir=str(tmp_path / "again"))
    )
    for path in (outcome["export"], again):
        loaded = tf.saved_model.load(str(path))
        signature = loaded.signatures["serving_default"]
        assert not [v.name for v in signature.variables if "lora" in v.name]
        served = signature(text_a=tf.constant(texts))["embeddings"].numpy()
        np.testing.assert_allclose(served, outcome["predict"], rtol=0, atol=1e-5)
