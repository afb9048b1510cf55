"""run_pretraining.py end to end: Google checkpoints in and out, eval_results.txt, resume, seeds, workers."""

import collections
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

import run_pretraining
from bert_tf.checkpoints import restore_init_checkpoint
from bert_tf.errors import InputError
from bert_tf.modeling import BertConfig
from bert_tf.optimization import AdamWeightDecay, Lamb, WarmupLinearDecay
from bert_tf.tasks.pretraining import PretrainingSettings, pretraining_trainable
from bert_tf.training import Trainer, TrainSettings

from conftest import FLOAT32_EPS, assert_float32_close, free_ports

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVAL_KEYS = {
    "global_step", "loss", "masked_lm_accuracy", "masked_lm_loss", "masked_lm_perplexity",
    "next_sentence_accuracy", "next_sentence_loss",
}  # fmt: skip


def write_original_records(path, features, copies=1):
    """Writes TFRecords exactly as the original create_pretraining_data.py does (int64 lists, float weights)."""

    def int64s(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(copies):
            for i in range(len(features["input_ids"])):
                example = {
                    name: int64s(features[name][i])
                    for name in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids")
                }  # fmt: skip
                example["masked_lm_weights"] = tf.train.Feature(
                    float_list=tf.train.FloatList(value=features["masked_lm_weights"][i].tolist())
                )
                example["next_sentence_labels"] = int64s([features["next_sentence_labels"][i]])
                record = tf.train.Example(features=tf.train.Features(feature=example))
                writer.write(record.SerializeToString())
    return str(path)


@pytest.fixture
def reference_records(tmp_path, reference):
    return write_original_records(tmp_path / "reference.tfrecord", reference, copies=4)


@pytest.fixture
def no_dropout_config(tmp_path, google_ckpt_dir):
    config = json.loads((google_ckpt_dir / "bert_config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(config))
    return str(path)


def run(**flag_values):
    """Runs run_pretraining in this process with the given flags; returns (trainer, eval results)."""
    trainer = run_pretraining.run(PretrainingSettings(**flag_values))
    results_path = os.path.join(flag_values["output_dir"], "eval_results.txt")
    results = None
    if flag_values.get("do_eval") and os.path.exists(results_path):
        results = read_eval_results(results_path)
    return trainer, results


def read_eval_results(path):
    results = {}
    with open(path) as f:
        for line in f:
            key, value = line.strip().split(" = ")
            results[key] = float(value)
    return results


def tiny_flags(config_path, input_file, output_dir, **overrides):
    values = dict(
        bert_config_file=config_path, input_file=input_file, output_dir=str(output_dir),
        max_seq_length=23, max_predictions_per_seq=5, train_batch_size=4, eval_batch_size=4,
        learning_rate=1e-3, num_train_steps=4, num_warmup_steps=1, save_checkpoints_steps=2,
        iterations_per_loop=2, log_steps=2, max_eval_steps=4, do_train=True, do_eval=True,
    )  # fmt: skip
    values.update(overrides)
    return values


def test_eval_of_a_google_checkpoint_reproduces_its_own_loss(tmp_path, google_ckpt_dir, reference):
    records = write_original_records(tmp_path / "ref.tfrecord", reference)
    _, results = run(
        **tiny_flags(
            str(google_ckpt_dir / "bert_config.json"), records, tmp_path / "out",
            init_checkpoint=str(google_ckpt_dir / "bert_model.ckpt"), do_train=False,
        )
    )  # fmt: skip
    assert set(results) == EVAL_KEYS
    assert results["global_step"] == 0
    # One batch of 4: the eval loss is the original's per-batch total loss. Scalars of ~10 reduced in
    # float32 differ from the original's by ~1e-7 relative; rel=1e-5 is 84 rounding steps above that,
    # and a wrong normalizer (per replica, without +1e-5, per example) is off by 1e-3 or more.
    expected = float(reference["masked_lm_loss"] + reference["next_sentence_loss"])
    assert results["loss"] == pytest.approx(expected, rel=1e-5)
    assert results["next_sentence_loss"] == pytest.approx(
        float(reference["next_sentence_loss"]), rel=1e-5
    )
    # The metric is the weighted mean, the loss divides by sum(weights) + 1e-5: equal to ~1e-5 relative.
    assert results["masked_lm_loss"] == pytest.approx(float(reference["masked_lm_loss"]), rel=1e-4)
    ids, log_probs = reference["masked_lm_ids"], reference["masked_lm_log_probs"]
    weights = reference["masked_lm_weights"]
    accuracy = np.sum((log_probs.argmax(-1) == ids) * weights) / np.sum(weights)
    assert results["masked_lm_accuracy"] == pytest.approx(accuracy, abs=1e-6)
    # Perplexity (the paper's Table 6): exp of the mean negative log-likelihood of the masked
    # positions, each weighted by masked_lm_weights, from the original's log-probs.
    nll = -np.take_along_axis(log_probs, ids[..., None], axis=-1)[..., 0]
    perplexity = np.exp(np.sum(nll * weights) / np.sum(weights))
    # rel 5e-4: the loss above may be 1e-4 relative off, and exp turns its absolute error (loss ~5)
    # into a relative one; unweighted positions or exp of the total loss are off by far more.
    assert results["masked_lm_perplexity"] == pytest.approx(perplexity, rel=5e-4)


def test_eval_reads_gzip_records_and_repeats_them_like_the_original(
    tmp_path, google_ckpt_dir, reference
):
    plain = write_original_records(tmp_path / "ref.tfrecord", reference)
    records = tmp_path / "ref.tfrecord.gz"  # as --output_compression=gzip writes them
    with open(plain, "rb") as source, gzip.open(records, "wb") as target:
        shutil.copyfileobj(source, target)
    os.remove(plain)
    # 4 records, eval batches of 8: the original repeats its eval input, so every batch holds each
    # record twice and the results are those of the 4 records.
    _, results = run(
        **tiny_flags(
            str(google_ckpt_dir / "bert_config.json"), str(records), tmp_path / "out",
            init_checkpoint=str(google_ckpt_dir / "bert_model.ckpt"), do_train=False,
            eval_batch_size=8, max_eval_steps=3,
        )
    )  # fmt: skip
    expected = float(reference["masked_lm_loss"] + reference["next_sentence_loss"])
    assert results["loss"] == pytest.approx(expected, rel=1e-5)


def test_training_writes_checkpoints_eval_results_and_a_google_export(
    tmp_path, no_dropout_config, reference_records
):
    out = tmp_path / "out"
    trainer, results = run(**tiny_flags(no_dropout_config, reference_records, out))
    assert results["global_step"] == 4
    assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-4")
    names = dict(tf.train.list_variables(str(out / "bert_model.ckpt")))
    assert names["bert/encoder/layer_1/attention/self/query/kernel"] == [48, 48]
    assert "cls/predictions/output_bias" in names
    assert (out / "bert_config.json").exists()
    assert not [
        name for name in os.listdir(out) if name.startswith((".export", "eval_results.txt."))
    ]
    assert tf.io.gfile.glob(str(out / "train" / "events.out.tfevents.*"))
    # The export, read back as an --init_checkpoint, gives the same eval as the trained model.
    _, reloaded = run(
        **tiny_flags(
            no_dropout_config, reference_records, tmp_path / "reload",
            init_checkpoint=str(out / "bert_model.ckpt"), do_train=False,
        )
    )  # fmt: skip
    # The same weights (float32 round trip is exact) and inputs: only summation order may differ.
    for key in EVAL_KEYS - {"global_step"}:
        assert reloaded[key] == pytest.approx(results[key], rel=1e-5, abs=1e-6), key


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
def test_a_truncated_input_file_is_an_input_error_naming_it(
    tmp_path, no_dropout_config, reference, compressed
):
    good = write_original_records(tmp_path / "good.tfrecord", reference)
    bad = write_original_records(tmp_path / "bad.tfrecord", reference, copies=2)
    data = open(bad, "rb").read()[:-25]
    if compressed:
        data = gzip.compress(data)
    with open(bad, "wb") as f:
        f.write(data)
    with pytest.raises(
        InputError, match=r"bad\.tfrecord: corrupt or truncated TFRecord at record 7"
    ):
        run(**tiny_flags(no_dropout_config, f"{good},{bad}", tmp_path / "out", do_train=False))


def test_restart_resumes_from_the_latest_checkpoint(tmp_path, no_dropout_config, reference_records):
    out = tmp_path / "out"
    run(**tiny_flags(no_dropout_config, reference_records, out, num_train_steps=2, do_eval=False))
    trainer, results = run(
        **tiny_flags(no_dropout_config, reference_records, out, num_train_steps=4)
    )
    assert results["global_step"] == 4
    checkpoint_state = tf.train.get_checkpoint_state(str(out))
    assert [os.path.basename(p) for p in checkpoint_state.all_model_checkpoint_paths] == [
        "model.ckpt-2",
        "model.ckpt-4",
    ]


def test_same_seed_gives_the_same_result(tmp_path, google_ckpt_dir, reference_records):
    config = str(google_ckpt_dir / "bert_config.json")  # with dropout: the seed must fix it too
    _, first = run(**tiny_flags(config, reference_records, tmp_path / "a", seed=7))
    _, second = run(**tiny_flags(config, reference_records, tmp_path / "b", seed=7))
    _, other = run(**tiny_flags(config, reference_records, tmp_path / "c", seed=8))
    assert first == second
    assert other["loss"] != first["loss"]


def _two_updates(
    config_path, records, init_checkpoint, optimizer, num_accumulation_steps, model_dir
):
    """Two updates of batch 8 from the checkpoint, k micro-batches each: (trainer, last logged losses)."""
    bert_config = BertConfig.from_json_file(config_path)
    task = pretraining_trainable(bert_config, records, 23, 5, seed=11)
    keras.utils.set_random_seed(11)

    def optimizer_fn():
        # No clipping: at norm 1.0 a gradient of twice the size is clipped to the same update, and
        # a wrong normalizer changes the scale. Without it the m and v slots hold the sums as summed.
        schedule = WarmupLinearDecay(1e-3, num_train_steps=2, num_warmup_steps=0)
        return {"adamw": AdamWeightDecay, "lamb": Lamb}[optimizer](schedule, clip_norm=None)

    config = TrainSettings(
        str(model_dir), train_batch_size=8, num_train_steps=2, steps_per_loop=2, log_steps=2,
        save_checkpoints_steps=2, num_accumulation_steps=num_accumulation_steps,
    )  # fmt: skip
    trainer = Trainer(
        task, tf.distribute.OneDeviceStrategy("/cpu:0"), optimizer_fn, config,
        init_fn=lambda model: restore_init_checkpoint(model, init_checkpoint),
    )  # fmt: skip
    return trainer, trainer.train()


@pytest.mark.parametrize("optimizer", ["adamw", "lamb"])
def test_accumulating_micro_batches_gives_the_update_of_the_whole_batch(
    tmp_path, no_dropout_config, reference_records, ckpt_prefix, optimizer
):
    # The training input is shuffled with a seed: both runs read the same 16 records in one order.
    task = pretraining_trainable(
        BertConfig.from_json_file(no_dropout_config), reference_records, 23, 5, 11
    )
    batches = [
        [batch["input_ids"].numpy() for batch in task.dataset_fn(None, 8, True).take(2)]
        for _ in range(2)
    ]
    np.testing.assert_array_equal(batches[0], batches[1])
    assert not np.array_equal(batches[0][0][:4], batches[0][0][4:])  # two different micro-batches
    runs = {
        k: _two_updates(
            no_dropout_config, reference_records, ckpt_prefix, optimizer, k, tmp_path / f"k{k}"
        )
        for k in (1, 2)
    }
    whole, accumulated = runs[1][0], runs[2][0]
    assert whole.global_step == accumulated.global_step == 2
    # The logged loss sums the micro-batches' losses, each divided by the whole batch's counts.
    assert runs[2][1]["loss"] == pytest.approx(runs[1][1]["loss"], rel=1e-5)
    # The attention key biases get no gradient in exact arithmetic (a softmax ignores a shift of all
    # its inputs): theirs is rounding noise of ~1e-8, which Adam and LAMB divide by its own size,
    # so their values end up to lr apart. Their m slots are compared below.
    weights = [
        (expected, actual)
        for expected, actual in zip(whole.model.weights, accumulated.model.weights, strict=True)
        if not expected.path.endswith("key/bias")
    ]
    assert len(weights) == len(whole.model.weights) - 2
    for expected, actual in weights:
        # The same sums in another order, then two updates: measured up to 6 float32 rounding steps
        # of the largest weight of the array; the default 256 is 40x that.
        assert_float32_close(actual.numpy(), expected.numpy(), err_msg=expected.path)
    for slot in ("m", "v"):
        pairs = [
            (expected, actual)
            for expected, actual in zip(
                whole.optimizer.variables, accumulated.optimizer.variables, strict=True
            )
            if expected.path.endswith(f"_{slot}")
        ]
        assert len(pairs) == len(whole.model.trainable_weights)
        # m and v are the gradient sums themselves (m = 0.09 g1 + 0.1 g2): their rounding is that of
        # the whole backward pass, a few steps of the largest element of any variable's slot
        # (measured up to 44); 256 of them is 6x that. A micro-batch dropped or counted twice, or
        # normalized by its own counts, moves the gradient sums by 10% to 100%.
        largest = max(np.abs(expected.numpy()).max() for expected, _ in pairs)
        for expected, actual in pairs:
            np.testing.assert_allclose(
                actual.numpy(), expected.numpy(), rtol=0, atol=256 * FLOAT32_EPS * largest,
                err_msg=expected.path,
            )  # fmt: skip
    # Not a vacuous pass: the two updates moved the weights 10x further than that tolerance.
    embeddings = [v for v in whole.model.weights if v.path.endswith("word_embeddings")][0].numpy()
    initial = tf.train.load_checkpoint(ckpt_prefix).get_tensor("bert/embeddings/word_embeddings")
    assert np.abs(embeddings - initial).max() > 10 * 256 * FLOAT32_EPS * np.abs(initial).max()


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(input_file=""), "--input_file"),
        (dict(do_train=False, do_eval=False), "--do_train or --do_eval"),
        (dict(max_seq_length=64), "--max_seq_length"),
        (dict(train_batch_size=6, num_accumulation_steps=4), "--train_batch_size"),
        (dict(use_tpu=True, distribution_strategy="mirrored"), "--use_tpu"),
        (dict(num_gpus=2), "--num_gpus"),
    ],
)
def test_bad_flags_are_rejected_naming_the_flag(
    tmp_path, no_dropout_config, reference_records, overrides, message
):
    with pytest.raises(ValueError, match=message):
        run(**{**tiny_flags(no_dropout_config, reference_records, tmp_path), **overrides})


# ---------------------------------------------------------------- quality bar (pretraining learns)


@pytest.fixture(scope="module")
def austen_records(tmp_path_factory, austen_sentences_path, sample_vocab_path):
    """(training TFRecords, held-out TFRecords, vocab size) from Austen's first chapters.

    Training: a few hundred instances of the first 4 documents; held out: those of the next 2, which
    training never reads. The vocabulary is the uncased release's cut down to the special tokens and
    the wordpieces these texts produce: greedy longest-match WordPiece then splits every word exactly
    as with the full vocabulary (every piece it chose is still there, and no longer one is), while a
    2k-word softmax lets a tiny model get past the unigram stage within a CI-sized run.
    """
    from bert_tf.tokenization import FullTokenizer, load_vocab

    script = os.path.join(REPO_DIR, "create_pretraining_data.py")
    directory = tmp_path_factory.mktemp("austen")
    lines = austen_sentences_path.read_text(encoding="utf-8").splitlines()
    documents, parts = 0, {"train": [], "heldout": []}
    for line in lines:
        parts["train" if documents < 4 else "heldout"].append(line)
        if not line.strip():
            documents += 1
            if documents == 6:
                break

    tokenizer = FullTokenizer(str(sample_vocab_path), do_lower_case=True)
    text = parts["train"] + parts["heldout"]
    used = {piece for line in text for piece in tokenizer.tokenize(line)}
    full_vocab = list(load_vocab(str(sample_vocab_path)))
    vocab = [token for token in full_vocab if token in used or token.startswith("[")]
    vocab_path = directory / "vocab.txt"
    vocab_path.write_text("\n".join(vocab) + "\n", encoding="utf-8")

    outputs = {}
    for name, part in parts.items():
        (directory / f"{name}.txt").write_text("\n".join(part) + "\n", encoding="utf-8")
        outputs[name] = directory / f"{name}.tfrecord"
        subprocess.run(
            [sys.executable, script,
             f"--input_file={directory / f'{name}.txt'}", f"--output_file={outputs[name]}",
             f"--vocab_file={vocab_path}", "--do_lower_case=True", "--max_seq_length=64",
             "--max_predictions_per_seq=10", "--dupe_factor=1", "--random_seed=3"],
            check=True, cwd=REPO_DIR, capture_output=True, timeout=300,
        )  # fmt: skip
    count = sum(1 for _ in tf.data.TFRecordDataset(str(outputs["train"])))
    assert 200 <= count <= 500, count
    heldout = sum(1 for _ in tf.data.TFRecordDataset(str(outputs["heldout"])))
    assert heldout >= 64, heldout
    return str(outputs["train"]), str(outputs["heldout"]), len(vocab)


@pytest.mark.slow
def test_pretraining_on_austen_beats_chance_by_a_clear_margin(tmp_path, austen_records):
    records, heldout, vocab_size = austen_records
    config = dict(
        vocab_size=vocab_size, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=128, hidden_act="gelu", hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1, max_position_embeddings=64, type_vocab_size=2,
        initializer_range=0.02,
    )  # fmt: skip
    (tmp_path / "bert_config.json").write_text(json.dumps(config))
    flags = dict(
        max_seq_length=64,
        max_predictions_per_seq=10,
        eval_batch_size=32,
        max_eval_steps=20,
    )
    run(
        **tiny_flags(
            str(tmp_path / "bert_config.json"), records, tmp_path / "out", train_batch_size=32,
            learning_rate=1e-3, num_train_steps=400, num_warmup_steps=40,
            save_checkpoints_steps=400, iterations_per_loop=100, log_steps=100, do_eval=False,
            **flags,
        )
    )  # fmt: skip
    # Evaluated from the run's exported checkpoint on the held-out documents' instances, and on its
    # own training instances.
    results = {}
    for name, path in (("heldout", heldout), ("train", records)):
        _, results[name] = run(
            **tiny_flags(
                str(tmp_path / "bert_config.json"), path, tmp_path / name, do_train=False,
                init_checkpoint=str(tmp_path / "out" / "bert_model.ckpt"), **flags,
            )
        )  # fmt: skip

    # The unigram baseline: always answering the training instances' commonest masked word, scored
    # on the held-out masked words (chance is 1/vocab_size).
    def masked_words(path):
        words = []
        for record in tf.data.TFRecordDataset(path):
            feature = tf.train.Example.FromString(record.numpy()).features.feature
            ids, weights = feature["masked_lm_ids"].int64_list, feature["masked_lm_weights"]
            words += [i for i, w in zip(ids.value, weights.float_list.value, strict=True) if w > 0]
        return words

    commonest = collections.Counter(masked_words(records)).most_common(1)[0][0]
    heldout_words = masked_words(heldout)
    baseline = heldout_words.count(commonest) / len(heldout_words)
    assert results["heldout"]["masked_lm_accuracy"] > baseline + 0.02, (results, baseline)
    # Measured: 0.095 held out against a baseline of 0.057 (the eval is seeded and deterministic;
    # the margin 0.02 leaves room for another CPU's rounding), 0.37 on the training instances.
    # The next-sentence task is learned on the training pairs (1.0) but at this size does not carry
    # to new documents (0.53 held out): only the former is asserted.
    assert results["train"]["next_sentence_accuracy"] > 0.8, results


# ---------------------------------------------------------------- several worker processes


def _start_workers(flag_values, log_dir, attempt):
    ports = free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    processes = []
    for index in range(2):
        env = {
            **os.environ,
            "TF_CONFIG": json.dumps(
                {"cluster": cluster, "task": {"type": "worker", "index": index}}
            ),
            "PYTHONPATH": os.pathsep.join(
                [REPO_DIR, *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
            "TF_CPP_MIN_LOG_LEVEL": "1",
        }
        args = [f"--{name}={value}" for name, value in flag_values.items()]
        log = open(log_dir / f"worker{index}-{attempt}.log", "w")  # noqa: SIM115
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    os.path.join(REPO_DIR, "run_pretraining.py"),
                    *args,
                    "--alsologtostderr",
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO_DIR,
                start_new_session=True,
            )  # fmt: skip
        )
    return processes


def _stop(processes):
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


_MIRRORED_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0],
        [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])
    sys.path.insert(0, "tests")
    import test_run_pretraining as t
    config, records, out = sys.argv[1:]
    results = {}
    for strategy in ("one_device", "mirrored"):
        trainer, results[strategy] = t.run(**t.tiny_flags(
            config, records, f"{out}/{strategy}", distribution_strategy=strategy,
            train_batch_size=8, eval_batch_size=8))
        results[strategy]["replicas"] = trainer.strategy.num_replicas_in_sync
    print(json.dumps(results))
    """
)


@pytest.mark.slow
def test_mirrored_over_two_cpu_devices_trains_bert_as_one_device_does(
    tmp_path, no_dropout_config, reference_records
):
    # Logical devices must be set before TF starts, hence a fresh process. The masked-LM weights
    # differ between the replicas' halves of each batch: the loss must use the global sum.
    env = {**os.environ, "PYTHONPATH": REPO_DIR, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(
        [sys.executable, "-c", _MIRRORED_SCRIPT, no_dropout_config, reference_records, str(tmp_path)],
        cwd=REPO_DIR, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(result.stdout.strip().splitlines()[-1])
    one, two = results["one_device"], results["mirrored"]
    assert (one["replicas"], two["replicas"]) == (1, 2)
    assert one["global_step"] == two["global_step"] == 4
    # Four training steps with another summation order over replicas: rounding differences grow
    # through the updates to ~1e-6 relative; the per-replica-normalizer bug this guards against
    # changes the results by several percent.
    for key in EVAL_KEYS - {"global_step"}:
        assert two[key] == pytest.approx(one[key], rel=1e-4, abs=1e-6), key
    one_ckpt = tf.train.load_checkpoint(str(tmp_path / "one_device" / "bert_model.ckpt"))
    two_ckpt = tf.train.load_checkpoint(str(tmp_path / "mirrored" / "bert_model.ckpt"))
    for name, _ in tf.train.list_variables(str(tmp_path / "one_device" / "bert_model.ckpt")):
        np.testing.assert_allclose(
            two_ckpt.get_tensor(name), one_ckpt.get_tensor(name), rtol=1e-4, atol=1e-5, err_msg=name
        )


@pytest.mark.slow
def test_multi_worker_run_is_killed_and_resumes(tmp_path, no_dropout_config, reference_records):
    out = tmp_path / "out"
    flag_values = tiny_flags(
        no_dropout_config, reference_records, out, distribution_strategy="multi_worker_mirrored",
        train_batch_size=8, num_train_steps=100000, save_checkpoints_steps=2, iterations_per_loop=1,
        do_eval=False,
    )  # fmt: skip
    workers = _start_workers(flag_values, tmp_path, attempt=1)
    try:
        deadline = time.time() + 180
        while not (tf.train.latest_checkpoint(str(out)) or "").endswith(
            ("ckpt-4", "ckpt-6", "ckpt-8")
        ):
            assert all(w.poll() is None for w in workers), (tmp_path / "worker0-1.log").read_text()[
                -3000:
            ]
            assert time.time() < deadline, "no checkpoint within 180 s"
            time.sleep(0.2)
    finally:
        _stop(workers)  # killed mid-run
    killed_at = int(tf.train.latest_checkpoint(str(out)).rsplit("-", 1)[1])

    flag_values.update(num_train_steps=killed_at + 2, do_eval=True)
    workers = _start_workers(flag_values, tmp_path, attempt=2)
    try:
        for worker in workers:
            assert worker.wait(timeout=240) == 0, (tmp_path / "worker0-2.log").read_text()[-3000:]
    finally:
        _stop(workers)
    chief_log = (tmp_path / "worker0-2.log").read_text()
    assert f"at global step {killed_at}" in chief_log
    assert read_eval_results(out / "eval_results.txt")["global_step"] == killed_at + 2
    assert tf.train.latest_checkpoint(str(out)).endswith(f"ckpt-{killed_at + 2}")
    assert (out / "bert_model.ckpt.index").exists()
    assert not [name for name in os.listdir(out) if name.startswith("worker")]
    # The two workers' evaluation is of the whole batches, not of one worker's half: one process
    # evaluating the exported weights on the same records gives the same figures.
    _, single = run(**tiny_flags(
        no_dropout_config, reference_records, tmp_path / "single", do_train=False,
        init_checkpoint=str(out / "bert_model.ckpt"),
    ))  # fmt: skip
    workers_results = read_eval_results(out / "eval_results.txt")
    for key in EVAL_KEYS - {"global_step"}:
        assert workers_results[key] == pytest.approx(single[key], rel=1e-5, abs=1e-6), key
