"""LoRA adapters on the task models (bert_tf.adapters, BertModel.enable_lora, BertTask).

References: a hand-merged model whose kernels are numpy's W + A @ B * alpha / rank; a fresh
from_preset of the same base folder; a process that imports only tensorflow and tensorflow_text.
"""

import json
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertPreprocessor, BertTextClassifier, BertTextEmbedder, BertTokenClassifier
from bert_tf.checkpoints import save_google_checkpoint
from bert_tf.modeling import BertConfig, BertModel
from bert_tf.models.task import LORA_LEARNING_RATE

from conftest import SAMPLE_DIR, SUBPROCESS_ENV

TEXTS = ["the lady was happy", "she was very sad", "it rained all day", "a b c", "yes"] * 4
LABELS = [0, 1, 2, 1, 0] * 4
TINY = {
    "vocab_size": 30522,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    "type_vocab_size": 2,
}


def _write_base(folder, seed):
    keras.utils.set_random_seed(seed)
    encoder = BertModel(BertConfig.from_dict(TINY))
    encoder.build()
    os.makedirs(folder)
    save_google_checkpoint(encoder, os.path.join(folder, "bert_model.ckpt"))
    with open(os.path.join(folder, "bert_config.json"), "w") as f:
        json.dump(TINY, f)
    shutil.copy(SAMPLE_DIR / "vocab.txt", os.path.join(folder, "vocab.txt"))
    return folder


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A release-like folder (bert_config.json, vocab.txt, bert_model.ckpt) of a tiny encoder."""
    return _write_base(str(tmp_path_factory.mktemp("lora") / "base"), seed=1)


def _classifier(base, rank=4, **lora):
    model = BertTextClassifier.from_preset(base, num_classes=3, max_seq_length=16)
    if rank:
        model.backbone.enable_lora(rank=rank, **lora)
    return model


def _randomize_adapters(model, seed=3):
    """Non-zero A and B (B starts at zero), so that the adapters change the outputs."""
    rng = np.random.default_rng(seed)
    for variable in model.trainable_weights:
        variable.assign(rng.normal(0, 0.2, variable.shape).astype(np.float32))


def test_enable_lora_trains_the_adapters_and_the_head_alone(base):
    model = _classifier(base)
    trainable = sorted(v.path.split("/", 1)[1] for v in model.trainable_weights)
    expected = sorted(
        [f"head/{name}" for name in ("output_weights", "output_bias")]
        + [
            f"bert/layer_{i}/attention/{target}/lora_kernel_{ab}"
            for i in range(2)
            for target in ("query", "value")
            for ab in "ab"
        ]
    )
    assert trainable == expected
    before = {v.path: v.numpy().copy() for v in model.weights}
    model.fit(TEXTS, LABELS, batch_size=4, epochs=1, verbose=0)
    changed = {
        v.path.split("/", 1)[1]
        for v in model.weights
        if not np.array_equal(before[v.path], v.numpy())
    }
    # The biases, LayerNorms, embeddings and kernels stay as loaded (Keras' Dense.enable_lora
    # alone would train the biases); the head and every adapter's B (zero at first) move.
    assert changed <= set(expected)
    assert {p for p in expected if not p.endswith("lora_kernel_a")} <= changed


def test_target_names_choose_the_projections(base):
    model = _classifier(base, target_names=["key", "attention_output", "intermediate", "output"])
    adapted = {v.path.split("/")[-2] for v in model.trainable_weights if "lora_kernel" in v.path}
    assert adapted == {"key", "attention_output", "intermediate", "output"}
    assert model.backbone.lora_target_names == ("key", "attention_output", "intermediate", "output")


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"rank": 4, "target_names": ["query", "W_q"]}, r"unknown target_names \['W_q'\]; .*'key'"),
        ({"rank": 0}, "rank must be a positive integer"),
        ({"rank": 2.5}, "rank must be a positive integer"),
    ],
)
def test_bad_lora_arguments_are_one_line(base, arguments, message):
    model = _classifier(base, rank=None)
    with pytest.raises(ValueError, match=message) as error:
        model.backbone.enable_lora(**arguments)
    assert "\n" not in str(error.value)
    assert model.backbone.lora_rank is None
    assert all(v.trainable for v in model.backbone.encoder_layers[0].weights)  # nothing frozen


def test_lora_equals_a_hand_merged_numpy_model(base):
    model = _classifier(base, rank=3, target_names=["query", "value", "intermediate"])
    _randomize_adapters(model)
    plain = _classifier(base, rank=None)
    values = {}
    for variable in model.weights:
        values[variable.path.split("/", 1)[1]] = variable.numpy()
    for variable in plain.weights:
        path = variable.path.split("/", 1)[1]
        value = values[path]
        prefix = path[: -len("kernel")]
        if path.endswith("/kernel") and prefix + "lora_kernel_a" in values:
            value = value + values[prefix + "lora_kernel_a"] @ values[prefix + "lora_kernel_b"]
        variable.assign(value)  # alpha = rank: the update is A @ B unscaled
    merged = plain.predict(TEXTS, verbose=0)
    adapted = model.predict(TEXTS, verbose=0)
    assert np.abs(adapted - _classifier(base, rank=None).predict(TEXTS, verbose=0)).max() > 1e-2
    np.testing.assert_allclose(adapted, merged, rtol=0, atol=1e-5)


def test_task_adapters_load_into_a_fresh_from_preset(base, tmp_path):
    model = _classifier(base)
    model.fit(TEXTS, LABELS, batch_size=4, epochs=2, verbose=0)
    expected = model.predict(TEXTS, verbose=0)
    model.save_lora_weights(tmp_path / "task.npz")
    fresh = _classifier(base, rank=None)
    fresh.load_lora_weights(tmp_path / "task.npz")  # enables the file's rank and targets
    assert fresh.backbone.lora_rank == 4
    np.testing.assert_allclose(fresh.predict(TEXTS, verbose=0), expected, rtol=0, atol=1e-5)
    # The file is the adapters and the head: a small part of the model.
    model.save_weights(tmp_path / "full.weights.h5")
    assert os.path.getsize(tmp_path / "task.npz") < 0.03 * os.path.getsize(
        tmp_path / "full.weights.h5"
    )


def test_backbone_adapters_with_the_head_copied_over(base, tmp_path):
    model = _classifier(base)
    _randomize_adapters(model)
    model.backbone.save_lora_weights(tmp_path / "backbone.npz")
    fresh = _classifier(base)
    fresh.backbone.load_lora_weights(tmp_path / "backbone.npz")
    for mine, theirs in zip(fresh.head_variables(), model.head_variables(), strict=True):
        mine.assign(theirs)
    np.testing.assert_allclose(
        fresh.predict(TEXTS, verbose=0), model.predict(TEXTS, verbose=0), rtol=0, atol=1e-5
    )


def test_adapters_refuse_another_base_rank_targets_or_head(base, tmp_path):
    model = _classifier(base)
    _randomize_adapters(model)
    path = tmp_path / "adapters.npz"
    model.save_lora_weights(path)
    other_base = _write_base(str(tmp_path / "other"), seed=2)
    cases = [
        (_classifier(other_base, rank=None), "trained on another base"),
        (_classifier(base, rank=8), r"rank=4, but this encoder's enable_lora has rank=8"),
        (_classifier(base, target_names=["key"]), r"target_names=\['query', 'value'\]"),
        (BertTokenClassifier.from_preset(base, ["O", "B", "I", "X"]), "holds a head"),
    ]
    for target, message in cases:
        before = [v.numpy().copy() for v in target.weights]
        with pytest.raises(ValueError, match=message) as error:
            target.load_lora_weights(path)
        assert "\n" not in str(error.value)
        assert all(
            np.array_equal(b, v.numpy()) for b, v in zip(before, target.weights, strict=True)
        )
    config = {**TINY, "num_hidden_layers": 1}
    encoder = BertModel(BertConfig.from_dict(config))
    with pytest.raises(ValueError, match="another encoder: num_hidden_layers 2 .file. vs 1"):
        encoder.load_lora_weights(path)
    with pytest.raises(FileNotFoundError, match="missing.npz does not exist"):
        encoder.load_lora_weights(tmp_path / "missing.npz")


def test_keras_save_and_load_keep_predictions_and_train_on(base, tmp_path):
    model = _classifier(base)
    _randomize_adapters(model)
    expected = model.predict(TEXTS, verbose=0)
    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras")
    np.testing.assert_allclose(loaded.predict(TEXTS, verbose=0), expected, rtol=0, atol=1e-5)
    assert loaded.backbone.lora_rank == 4
    assert len(loaded.trainable_weights) == len(model.trainable_weights)
    # Keras loads the adapters merged into the kernels, A = B = 0; fit draws A anew and B moves.
    loaded.fit(TEXTS, LABELS, batch_size=4, epochs=1, verbose=0)
    query = loaded.backbone.encoder_layers[0].attention.query
    assert np.abs(query.lora_kernel_b.numpy()).max() > 0


def test_default_compile_uses_the_lora_rate_and_a_given_rate_wins(base):
    model = _classifier(base, rank=None)
    assert model._recipe_rate() == model.default_learning_rate
    model.backbone.enable_lora(rank=2)
    model.fit(TEXTS[:8], LABELS[:8], batch_size=4, epochs=1, verbose=0)
    # The schedule fit compiled: its peak, over fit's two steps.
    schedule = model.optimizer._learning_rate
    assert (schedule.init_lr, schedule.num_train_steps) == (LORA_LEARNING_RATE, 2)
    model.compile(learning_rate=2e-4)
    model.fit(TEXTS[:8], LABELS[:8], batch_size=4, epochs=1, verbose=0)
    assert model.optimizer._learning_rate.init_lr == 2e-4


_SERVE = """
import sys, json
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the export's tokenizer ops)
loaded = tf.saved_model.load(sys.argv[1])
out = loaded.signatures["serving_default"](text_a=tf.constant(json.loads(sys.argv[2])))
print(json.dumps({"probabilities": out["probabilities"].numpy().tolist(),
                  "bert_tf": "bert_tf" in sys.modules}))
"""


def test_export_merges_the_adapters_and_serves_like_predict(base, tmp_path):
    model = _classifier(base)
    _randomize_adapters(model)
    probabilities = tf.nn.softmax(model.predict(TEXTS, verbose=0)).numpy()
    model.export(tmp_path / "export")
    names = [
        name for name, _ in tf.train.list_variables(str(tmp_path / "export/variables/variables"))
    ]
    assert not [name for name in names if "lora" in name]
    env = {key: value for key, value in SUBPROCESS_ENV.items() if key != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-c", _SERVE, str(tmp_path / "export"), json.dumps(TEXTS)],
        capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path, check=True,
    )  # fmt: skip
    served = json.loads(result.stdout.strip().splitlines()[-1])
    assert not served["bert_tf"]
    np.testing.assert_allclose(served["probabilities"], probabilities, rtol=0, atol=1e-5)


def test_every_task_model_takes_adapters(base, tmp_path):
    from bert_tf import BertMaskedLM, BertMultipleChoice, BertQuestionAnswerer

    models = {
        "tagger": BertTokenClassifier.from_preset(base, ["O", "X"]),
        "squad": BertQuestionAnswerer.from_preset(base, max_query_length=16),
        "swag": BertMultipleChoice.from_preset(base),
        "embedder": BertTextEmbedder.from_preset(base),
        "masked_lm": BertMaskedLM(BertPreprocessor(str(SAMPLE_DIR / "vocab.txt")), TINY),
    }
    for name, model in models.items():
        model.backbone.enable_lora(rank=2)
        adapters = [v for v in model.trainable_weights if "lora_kernel" in v.path]
        assert len(adapters) == 8, name
        frozen = [v for v in model.backbone.weights if "lora_kernel" not in v.path]
        assert not any(v.trainable for v in frozen), name
        model.save_lora_weights(tmp_path / f"{name}.npz")
        model.load_lora_weights(tmp_path / f"{name}.npz")


def test_quantize_then_lora_then_fit_trains_the_adapters_on_int8_kernels(base, tmp_path):
    model = _classifier(base, rank=None)
    model.quantize("int8")
    model.backbone.enable_lora(rank=2)
    query = model.backbone.encoder_layers[0].attention.query
    kernel = query._kernel.numpy().copy()
    model.fit(TEXTS, LABELS, batch_size=4, epochs=2, verbose=0)
    assert query._kernel.dtype == "int8" and np.array_equal(query._kernel.numpy(), kernel)
    assert np.abs(query.lora_kernel_b.numpy()).max() > 0
    expected = model.predict(TEXTS, verbose=0)
    model.export(tmp_path / "export")
    served = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"]
    probabilities = served(text_a=tf.constant(TEXTS))["probabilities"].numpy()
    # The export requantizes W + A @ B: within a few int8 steps of the adapted model.
    np.testing.assert_allclose(probabilities, tf.nn.softmax(expected).numpy(), rtol=0, atol=2e-2)


def test_minilm_rank_8_trains_at_most_3_percent_of_the_weights(minilm_converted, tmp_path):
    model = BertTextClassifier.from_preset(minilm_converted, num_classes=6)
    model.backbone.enable_lora(rank=8)
    trainable = sum(int(np.prod(v.shape)) for v in model.trainable_weights)
    total = sum(int(np.prod(v.shape)) for v in model.weights)
    assert trainable == 6 * 2 * (384 * 8 + 8 * 384) + 384 * 6 + 6
    assert trainable / total <= 0.03
    model.save_lora_weights(tmp_path / "adapters.npz")
    model.save_weights(tmp_path / "full.weights.h5")
    assert os.path.getsize(tmp_path / "adapters.npz") <= 0.03 * os.path.getsize(
        tmp_path / "full.weights.h5"
    )
