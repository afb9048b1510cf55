"""BertConfig, BertModel, BertPretrainingModel and pretraining_loss against the original TF1 code.

The reference is tests/fixtures/google_ckpt_tiny: a checkpoint with random weights and the
outputs the original google-research modeling.py / run_pretraining.py computed from it
(reference.npz). Where the original has no output to compare (other activations), a float64 numpy
forward pass written here, itself checked against reference.npz, is the reference.
"""

import json
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import (
    google_variable_names,
    load_google_checkpoint,
    save_google_checkpoint,
)
from bert_tf.layers import ACTIVATIONS
from bert_tf.layers.activations import TRAINING_ACTIVATIONS
from bert_tf.modeling import (
    PRESETS,
    BertConfig,
    BertModel,
    BertPretrainingModel,
    pretraining_loss,
)
from bert_tf.optimization import NO_DECAY_PATTERNS

from conftest import assert_float32_close

MODEL_INPUTS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
LABELS = ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")
# The original optimization.py's exclude_from_weight_decay, applied to Google's variable names.
ORIGINAL_NO_DECAY = ("LayerNorm", "layer_norm", "bias")


@pytest.fixture(scope="module")
def features(reference):
    return {name: tf.constant(reference[name]) for name in MODEL_INPUTS + LABELS}


def _loaded(model_class, config, ckpt_prefix, **kwargs):
    model = model_class(config, **kwargs)
    load_google_checkpoint(model, ckpt_prefix)
    return model


@pytest.fixture(scope="module")
def pretraining_model(config, ckpt_prefix):
    """Loaded from the fixture; tests must not change its weights."""
    return _loaded(BertPretrainingModel, config, ckpt_prefix)


def _assert_close(actual, expected, name=""):
    """Equal up to float32 rounding (conftest.assert_float32_close: 256 eps of the largest value)."""
    assert_float32_close(np.asarray(tf.cast(actual, tf.float32)), expected, err_msg=name)


def _assert_roughly(actual, expected, atol, name=""):
    """Within `atol`: for reduced-precision outputs, where the rounding step is bfloat16's."""
    actual = np.asarray(tf.cast(actual, tf.float32))
    np.testing.assert_allclose(actual, expected, rtol=0, atol=atol, err_msg=name)


# --- Parity with the original TF1 code ------------------------------------------------------------


def test_embedding_output_matches_original(pretraining_model, features, reference):
    embedding_output = pretraining_model.bert.embedding_output(features)
    _assert_close(embedding_output, reference["embedding_output"])


def test_pretraining_model_outputs_match_original(pretraining_model, features, reference):
    outputs = pretraining_model(features, training=False)
    for i in range(2):
        _assert_close(outputs["encoder_outputs"][i], reference[f"encoder_layer_{i}"], f"layer {i}")
    _assert_close(outputs["sequence_output"], reference["sequence_output"])
    _assert_close(outputs["pooled_output"], reference["pooled_output"])
    _assert_close(outputs["masked_lm_log_probs"], reference["masked_lm_log_probs"])
    _assert_close(outputs["next_sentence_log_probs"], reference["next_sentence_log_probs"])


@pytest.mark.parametrize("labels_shape", ["[B]", "[B, 1]"])
@pytest.mark.parametrize("mlm_output", ["masked_lm_logits", "masked_lm_log_probs only"])
def test_pretraining_loss_matches_original(
    pretraining_model, features, reference, labels_shape, mlm_output
):
    outputs = pretraining_model(features, training=False)
    if mlm_output != "masked_lm_logits":  # e.g. log-probabilities from another model or a file
        outputs = {k: v for k, v in outputs.items() if k != "masked_lm_logits"}
    labels = features["next_sentence_labels"]
    if labels_shape == "[B, 1]":
        labels = labels[:, tf.newaxis]
    losses = pretraining_loss(outputs, {**features, "next_sentence_labels": labels})
    _assert_close(losses["masked_lm_loss"], reference["masked_lm_loss"])
    _assert_close(losses["next_sentence_loss"], reference["next_sentence_loss"])
    _assert_close(losses["loss"], reference["masked_lm_loss"] + reference["next_sentence_loss"])


def test_bert_model_matches_original_and_reports_heads_unused(
    config, ckpt_prefix, features, reference
):
    model = BertModel(config)
    unused = load_google_checkpoint(model, ckpt_prefix)
    assert unused == sorted(
        name for name, _ in tf.train.list_variables(ckpt_prefix) if name.startswith("cls/")
    )
    assert len(unused) == 7
    outputs = model(features, training=False)
    assert len(outputs["encoder_outputs"]) == 2
    for i in range(2):
        _assert_close(outputs["encoder_outputs"][i], reference[f"encoder_layer_{i}"], f"layer {i}")
    _assert_close(outputs["sequence_output"], reference["sequence_output"])
    _assert_close(outputs["pooled_output"], reference["pooled_output"])


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_outputs_match_original_inside_tf_function(
    pretraining_model, features, reference, jit_compile
):
    call = tf.function(lambda x: pretraining_model(x, training=False), jit_compile=jit_compile)
    outputs = call({name: features[name] for name in MODEL_INPUTS})
    _assert_close(outputs["sequence_output"], reference["sequence_output"])
    _assert_close(outputs["pooled_output"], reference["pooled_output"])
    _assert_close(outputs["masked_lm_log_probs"], reference["masked_lm_log_probs"])
    _assert_close(outputs["next_sentence_log_probs"], reference["next_sentence_log_probs"])


# --- Inputs, padding, dropout ---------------------------------------------------------------------


def test_padding_does_not_change_unpadded_outputs(pretraining_model, reference):
    batch_size, seq_length = reference["input_ids"].shape
    extra = 10  # 23 + 10 <= max_position_embeddings (40)
    rng = np.random.default_rng(0)

    def pad(name, values):
        return np.concatenate([reference[name], values], axis=1)

    padded = {
        "input_ids": pad("input_ids", rng.integers(0, 101, (batch_size, extra))),
        "input_mask": pad("input_mask", np.zeros((batch_size, extra), np.int32)),
        "segment_ids": pad("segment_ids", rng.integers(0, 2, (batch_size, extra))),
        "masked_lm_positions": reference["masked_lm_positions"],
    }
    outputs = pretraining_model(
        {name: tf.constant(value, tf.int32) for name, value in padded.items()}, training=False
    )
    original = pretraining_model(
        {name: tf.constant(reference[name]) for name in MODEL_INPUTS}, training=False
    )
    real = reference["input_mask"].astype(bool)  # [B, S]
    # The padded run sums over more (exactly zero) attention terms in another order: float32 rounding
    # only (log-probs of magnitude 21 moved by up to 1.8e-5, 46 eps of it). Padding that leaked into
    # the attention would move them by 1e-2 or more.
    sequence_output = outputs["sequence_output"].numpy()[:, :seq_length]
    _assert_close(sequence_output[real], original["sequence_output"].numpy()[real])
    _assert_close(outputs["pooled_output"], original["pooled_output"].numpy())
    _assert_close(outputs["masked_lm_log_probs"], original["masked_lm_log_probs"].numpy())


def test_inference_is_deterministic_and_the_default(pretraining_model, features):
    inputs = {name: features[name] for name in MODEL_INPUTS}
    default = pretraining_model(inputs)
    for _ in range(2):
        outputs = pretraining_model(inputs, training=False)
        for name in ("sequence_output", "pooled_output", "masked_lm_log_probs"):
            np.testing.assert_array_equal(outputs[name].numpy(), default[name].numpy())


def test_training_applies_dropout(pretraining_model, features):
    assert pretraining_model.config.hidden_dropout_prob > 0
    inputs = {name: features[name] for name in MODEL_INPUTS}
    inference = pretraining_model(inputs, training=False)["sequence_output"].numpy()
    first = pretraining_model(inputs, training=True)["sequence_output"].numpy()
    second = pretraining_model(inputs, training=True)["sequence_output"].numpy()
    assert np.abs(first - inference).max() > 1e-3
    assert np.abs(first - second).max() > 1e-3


def test_zero_dropout_training_equals_inference(config, ckpt_prefix, features):
    config = BertConfig.from_dict(
        {**config.to_dict(), "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    )
    model = _loaded(BertModel, config, ckpt_prefix)
    training = model(features, training=True)["sequence_output"].numpy()
    # Dropout of rate 0 is skipped, not applied: the very same ops, so the very same numbers.
    np.testing.assert_array_equal(
        training, model(features, training=False)["sequence_output"].numpy()
    )


def test_input_mask_and_segment_ids_default_to_ones_and_zeros(pretraining_model, features):
    input_ids = features["input_ids"]
    positions = features["masked_lm_positions"]
    implicit = pretraining_model({"input_ids": input_ids, "masked_lm_positions": positions})
    explicit = pretraining_model(
        {
            "input_ids": input_ids,
            "input_mask": tf.ones_like(input_ids),
            "segment_ids": tf.zeros_like(input_ids),
            "masked_lm_positions": positions,
        }
    )
    for name in ("sequence_output", "pooled_output", "masked_lm_log_probs"):
        np.testing.assert_array_equal(implicit[name].numpy(), explicit[name].numpy())
    # And the defaults matter: the fixture's own mask and segments give other outputs.
    given = pretraining_model({name: features[name] for name in MODEL_INPUTS})
    assert np.abs(given["pooled_output"].numpy() - implicit["pooled_output"].numpy()).max() > 1e-3


def test_int64_inputs_are_accepted(pretraining_model, features, reference):
    inputs = {name: tf.cast(features[name], tf.int64) for name in MODEL_INPUTS}
    outputs = pretraining_model(inputs, training=False)
    _assert_close(outputs["sequence_output"], reference["sequence_output"])
    _assert_close(outputs["masked_lm_log_probs"], reference["masked_lm_log_probs"])


def test_sequence_longer_than_max_position_embeddings_raises(pretraining_model):
    too_long = pretraining_model.config.max_position_embeddings + 1
    inputs = {
        "input_ids": tf.zeros([1, too_long], tf.int32),
        "masked_lm_positions": tf.zeros([1, 1], tf.int32),
    }
    with pytest.raises(ValueError, match="max_position_embeddings"):
        pretraining_model(inputs)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        pretraining_model.bert({"input_ids": inputs["input_ids"]})
    with pytest.raises(ValueError, match="max_position_embeddings"):
        pretraining_model.bert.embedding_output({"input_ids": inputs["input_ids"]})
    # Length known only at run time: the check runs in the graph.
    embed = tf.function(
        lambda ids: pretraining_model.bert.embedding_output({"input_ids": ids}),
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_position_embeddings"):
        embed(inputs["input_ids"])


def test_sequence_of_exactly_max_position_embeddings_is_accepted(pretraining_model):
    seq_length = pretraining_model.config.max_position_embeddings
    outputs = pretraining_model.bert({"input_ids": tf.ones([1, seq_length], tf.int32)})
    assert outputs["sequence_output"].shape == (1, seq_length, 48)


# --- Mixed precision ------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["constructor", "global_policy"])
def test_mixed_bfloat16_keeps_float32_weights_and_log_probs(
    config, ckpt_prefix, features, reference, how
):
    if how == "constructor":
        model = _loaded(BertPretrainingModel, config, ckpt_prefix, dtype="mixed_bfloat16")
    else:
        keras.config.set_dtype_policy("mixed_bfloat16")
        try:
            model = _loaded(BertPretrainingModel, config, ckpt_prefix)
        finally:
            keras.config.set_dtype_policy("float32")
    outputs = model({name: features[name] for name in MODEL_INPUTS}, training=False)
    assert {weight.dtype for weight in model.weights} == {"float32"}
    assert outputs["sequence_output"].dtype == tf.bfloat16
    assert outputs["masked_lm_log_probs"].dtype == tf.float32
    assert outputs["next_sentence_log_probs"].dtype == tf.float32
    losses = pretraining_loss(outputs, features)
    assert losses["loss"].dtype == tf.float32
    # Only roughly the original's: see the next test for closeness.
    probs = np.exp(outputs["masked_lm_log_probs"].numpy())
    # Probabilities in [0, 1]: bfloat16 through this large-weighted fixture moves them by up to ~0.05;
    # 0.1 still fails on a head whose output is not a probability distribution of the right tokens.
    _assert_roughly(probs, np.exp(reference["masked_lm_log_probs"]), 0.1)


def test_mixed_bfloat16_outputs_are_close_to_float32(tmp_path, features):
    # Weights of realistic size: the fixture's (std 0.4, 20x BERT's) amplify bfloat16 rounding to
    # ~0.7 in the log-probs, so they test the dtypes above but not closeness.
    config = BertConfig(
        vocab_size=101,
        hidden_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=96,
        max_position_embeddings=40,
        type_vocab_size=2,
        initializer_range=0.1,
    )
    keras.utils.set_random_seed(1)
    float32_model = BertPretrainingModel(config)
    float32_model(float32_model.dummy_inputs())
    rng = np.random.default_rng(0)
    for weight in float32_model.weights:
        if len(weight.shape) == 1:  # biases, LayerNorm gamma and beta are zeros/ones at init
            weight.assign(weight.numpy() + rng.normal(0, 0.1, weight.shape))
    prefix = save_google_checkpoint(float32_model, str(tmp_path / "bert_model.ckpt"))
    mixed_model = _loaded(BertPretrainingModel, config, prefix, dtype="mixed_bfloat16")

    inputs = {name: features[name] for name in MODEL_INPUTS}
    expected = float32_model(inputs, training=False)
    actual = mixed_model(inputs, training=False)
    log_probs = expected["masked_lm_log_probs"].numpy()
    assert log_probs.max() - log_probs.min() > 1.0  # not a near-uniform distribution
    # bfloat16 keeps 8 mantissa bits (a rounding step of 2**-8 = 0.004 relative); through two layers and
    # a log-softmax over values of a few units that adds up to ~0.01. 0.05 is 5x that and still catches
    # a float16/bfloat16 overflow or a softmax left in bfloat16 (errors of 0.1 to 1 here).
    _assert_roughly(actual["masked_lm_log_probs"], log_probs, 0.05)
    _assert_roughly(
        actual["next_sentence_log_probs"], expected["next_sentence_log_probs"].numpy(), 0.05
    )
    _assert_roughly(actual["pooled_output"], expected["pooled_output"].numpy(), 0.05)


# --- BertConfig -----------------------------------------------------------------------------------


def test_config_from_json_file(config):
    assert config == BertConfig(
        vocab_size=101,
        hidden_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=96,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=40,
        type_vocab_size=2,
        initializer_range=0.02,
    )


def test_config_json_round_trip(config):
    assert BertConfig.from_dict(json.loads(config.to_json_string())) == config
    changed = BertConfig.from_dict({**config.to_dict(), "hidden_act": "relu", "vocab_size": 7})
    assert BertConfig.from_dict(json.loads(changed.to_json_string())) == changed


def test_config_defaults_are_the_originals():
    config = BertConfig(vocab_size=30522)
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (
        768,
        12,
        12,
    )
    assert (config.intermediate_size, config.hidden_act) == (3072, "gelu")
    assert (config.max_position_embeddings, config.type_vocab_size) == (512, 16)
    assert (config.hidden_dropout_prob, config.attention_probs_dropout_prob) == (0.1, 0.1)
    assert config.initializer_range == 0.02


def test_config_unknown_key_is_an_error_naming_it(config):
    with pytest.raises(ValueError, match="hidden_sise"):
        BertConfig.from_dict({**config.to_dict(), "hidden_sise": 64})


def test_config_accepts_google_release_pooler_keys(config):
    release_keys = {
        "directionality": "bidi",
        "pooler_fc_size": 768,
        "pooler_num_attention_heads": 12,
        "pooler_num_fc_layers": 3,
        "pooler_size_per_head": 128,
        "pooler_type": "first_token_transform",
    }
    assert BertConfig.from_dict({**config.to_dict(), **release_keys}) == config


@pytest.mark.parametrize(
    "field, value",
    [
        ("hidden_size", 50),  # not a multiple of 4 heads
        ("num_attention_heads", 5),
        ("hidden_act", "gelu_new"),
        ("vocab_size", 0),
        ("hidden_size", -48),
        ("num_hidden_layers", 0),
        ("num_attention_heads", 0),
        ("intermediate_size", -1),
        ("max_position_embeddings", 0),
        ("type_vocab_size", 0),
        ("hidden_dropout_prob", 1.0),
        ("attention_probs_dropout_prob", -0.1),
        ("initializer_range", 0.0),
        ("initializer_range", "0.02"),  # a string in a hand-edited JSON file
        ("hidden_act", ["gelu"]),
    ],
)
def test_config_invalid_value_is_an_error_naming_the_field(config, field, value):
    with pytest.raises(ValueError, match=field):
        BertConfig.from_dict({**config.to_dict(), field: value})


def test_config_from_something_else_than_a_dict_is_a_clear_error():
    with pytest.raises(ValueError, match="needs a dict of bert_config.json keys"):
        BertConfig.from_dict([1, 2])


def test_config_without_vocab_size_is_an_error(config):
    values = config.to_dict()
    del values["vocab_size"]
    with pytest.raises(ValueError, match="vocab_size"):
        BertConfig.from_dict(values)


def test_config_from_missing_file_names_the_path(tmp_path):
    path = str(tmp_path / "nowhere" / "bert_config.json")
    with pytest.raises(FileNotFoundError, match="nowhere"):
        BertConfig.from_json_file(path)


def test_config_from_invalid_json_file_names_the_path(tmp_path):
    path = tmp_path / "bad_config.json"
    path.write_text('{"vocab_size": 10,')
    with pytest.raises(ValueError, match="bad_config.json"):
        BertConfig.from_json_file(str(path))


def test_presets_base_and_large():
    base = BertConfig.from_preset("bert_base")
    large = BertConfig.from_preset("bert_large")

    def shape(c):
        return (c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.intermediate_size)

    assert shape(base) == (12, 768, 12, 3072)
    assert shape(large) == (24, 1024, 16, 4096)
    assert base.vocab_size == large.vocab_size == 30522
    assert base.max_position_embeddings == 512 and base.type_vocab_size == 2


@pytest.mark.parametrize("layers", [2, 4, 6, 8, 10, 12])
@pytest.mark.parametrize("hidden", [128, 256, 512, 768])
def test_presets_include_every_miniature(layers, hidden):
    heads = hidden // 64
    config = BertConfig.from_preset(f"L-{layers}_H-{hidden}_A-{heads}")
    assert config.num_hidden_layers == layers
    assert config.hidden_size == hidden
    assert config.num_attention_heads == heads
    assert config.intermediate_size == 4 * hidden
    assert config.vocab_size == 30522


def test_preset_overrides_and_unknown_preset():
    config = BertConfig.from_preset("L-2_H-128_A-2", vocab_size=8000, hidden_act="relu")
    assert (config.vocab_size, config.hidden_act, config.hidden_size) == (8000, "relu", 128)
    assert PRESETS["L-2_H-128_A-2"]["vocab_size"] == 30522  # the preset itself is unchanged
    with pytest.raises(ValueError, match="bert_huge"):
        BertConfig.from_preset("bert_huge")
    with pytest.raises(ValueError, match="hidden_sise"):
        BertConfig.from_preset("bert_base", hidden_sise=10)


# --- Activations ----------------------------------------------------------------------------------


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def _gelu_erf(x):
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


FORMULAS = {
    "gelu": _gelu_tanh,
    "gelu_exact": _gelu_erf,
    "relu": lambda x: max(x, 0.0),
    "tanh": math.tanh,
    "swish": lambda x: x / (1.0 + math.exp(-x)),
}


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_activation_matches_its_formula(name):
    xs = np.linspace(-6.0, 6.0, 97)
    actual = ACTIVATIONS[name](tf.constant(xs, tf.float32)).numpy()
    expected = np.array([FORMULAS[name](float(x)) for x in xs])
    # float32 elementwise math is a few rounding steps off the float64 formula (rtol 1e-5 is 84 eps;
    # atol covers values near 0); the tanh and erf GELUs differ by up to 2e-4, which this catches.
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["gelu", "gelu_exact"])
@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_training_gelu_has_the_formulas_value_and_derivative(name, dtype):
    xs = np.linspace(-6.0, 6.0, 97)
    x = tf.constant(xs, dtype)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = TRAINING_ACTIVATIONS[name](x)
    gradient = tape.gradient(y, x)
    assert (y.dtype, gradient.dtype) == (dtype, dtype)
    inputs = tf.cast(x, tf.float64).numpy()  # the bfloat16-rounded inputs, exactly
    step = 1e-5  # central differences of the float64 formula: error ~1e-10
    expected_value = np.array([FORMULAS[name](float(v)) for v in inputs])
    expected_gradient = np.array(
        [(FORMULAS[name](v + step) - FORMULAS[name](v - step)) / (2 * step) for v in inputs]
    )
    # float32: a few rounding steps (the derivative's 1 + tanh cancels far left of 0, as the formula's
    # own does: atol 1e-5 against derivatives of order 1); bfloat16: the output's own rounding (8-bit
    # mantissa, 2^-8 relative). The tanh and erf GELUs' derivatives differ by up to 9e-4 (float32 sees it).
    rtol, atol = (1e-5, 1e-6) if dtype == tf.float32 else (2**-8, 1e-3)
    np.testing.assert_allclose(tf.cast(y, tf.float64), expected_value, rtol=rtol, atol=atol)
    atol = 1e-5 if dtype == tf.float32 else atol
    np.testing.assert_allclose(
        tf.cast(gradient, tf.float64), expected_gradient, rtol=rtol, atol=atol
    )


def test_gelu_is_the_tanh_approximation_and_gelu_exact_the_erf_form():
    assert float(ACTIVATIONS["gelu"](tf.constant(1.0))) == pytest.approx(
        0.8411919906082768, abs=1e-6
    )
    exact = float(ACTIVATIONS["gelu_exact"](tf.constant(1.0)))
    assert exact == pytest.approx(0.8413447460685429, abs=1e-6)


def _np_layer_norm(x, gamma, beta):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + 1e-12) * gamma + beta


def _np_log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _np_bert(ckpt_prefix, config, activation, inputs):
    """The original's forward pass in float64 numpy from the checkpoint's tensors."""
    reader = tf.train.load_checkpoint(ckpt_prefix)
    w = {
        name: reader.get_tensor(name).astype(np.float64)
        for name in reader.get_variable_to_shape_map()
    }
    act = np.vectorize(FORMULAS[activation])
    ids, mask, segments = inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"]
    batch_size, seq_length = ids.shape
    heads, head_size = config.num_attention_heads, config.hidden_size // config.num_attention_heads

    x = (
        w["bert/embeddings/word_embeddings"][ids]
        + w["bert/embeddings/token_type_embeddings"][segments]
        + w["bert/embeddings/position_embeddings"][:seq_length]
    )
    x = _np_layer_norm(x, w["bert/embeddings/LayerNorm/gamma"], w["bert/embeddings/LayerNorm/beta"])
    for i in range(config.num_hidden_layers):
        p = f"bert/encoder/layer_{i}/"

        def dense(x, name, p=p):
            return x @ w[p + name + "/kernel"] + w[p + name + "/bias"]

        q, k, v = (
            dense(x, f"attention/self/{n}").reshape(batch_size, seq_length, heads, head_size)
            for n in ("query", "key", "value")
        )
        scores = np.einsum("bqnd,bknd->bnqk", q, k) / math.sqrt(head_size)
        scores += (1.0 - mask[:, None, None, :]) * -10000.0
        probs = np.exp(_np_log_softmax(scores))
        context = np.einsum("bnqk,bknd->bqnd", probs, v).reshape(batch_size, seq_length, -1)
        attention = _np_layer_norm(
            dense(context, "attention/output/dense") + x,
            w[p + "attention/output/LayerNorm/gamma"],
            w[p + "attention/output/LayerNorm/beta"],
        )
        x = _np_layer_norm(
            dense(act(dense(attention, "intermediate/dense")), "output/dense") + attention,
            w[p + "output/LayerNorm/gamma"],
            w[p + "output/LayerNorm/beta"],
        )
    pooled = np.tanh(x[:, 0] @ w["bert/pooler/dense/kernel"] + w["bert/pooler/dense/bias"])
    hidden = np.take_along_axis(x, inputs["masked_lm_positions"][..., None], axis=1)
    hidden = act(
        hidden @ w["cls/predictions/transform/dense/kernel"]
        + w["cls/predictions/transform/dense/bias"]
    )
    hidden = _np_layer_norm(
        hidden,
        w["cls/predictions/transform/LayerNorm/gamma"],
        w["cls/predictions/transform/LayerNorm/beta"],
    )
    logits = hidden @ w["bert/embeddings/word_embeddings"].T + w["cls/predictions/output_bias"]
    return {
        "sequence_output": x,
        "pooled_output": pooled,
        "masked_lm_log_probs": _np_log_softmax(logits),
    }


def test_numpy_reference_matches_original(config, ckpt_prefix, reference):
    # Guards the reference that the next test relies on.
    expected = _np_bert(ckpt_prefix, config, "gelu", reference)
    for name, value in expected.items():
        # float64 numpy against the original's float32 outputs: float32 rounding of the latter only.
        assert_float32_close(value, reference[name], err_msg=name)


@pytest.mark.parametrize("activation", ["gelu_exact", "relu"])
def test_config_hidden_act_is_the_activation_used(
    config, ckpt_prefix, reference, features, activation
):
    config = BertConfig.from_dict({**config.to_dict(), "hidden_act": activation})
    model = _loaded(BertPretrainingModel, config, ckpt_prefix)
    outputs = model({name: features[name] for name in MODEL_INPUTS}, training=False)
    expected = _np_bert(ckpt_prefix, config, activation, reference)
    for name, value in expected.items():
        _assert_close(outputs[name], value, name)
    # The activations differ enough that the comparison above could tell them apart.
    assert np.abs(outputs["sequence_output"].numpy() - reference["sequence_output"]).max() > 1e-3


# --- Keras serialization --------------------------------------------------------------------------


@pytest.mark.parametrize("model_class", [BertModel, BertPretrainingModel])
def test_keras_save_and_load_model_gives_identical_outputs(
    tmp_path, config, ckpt_prefix, features, reference, model_class
):
    model = _loaded(model_class, config, ckpt_prefix)
    inputs = {name: features[name] for name in MODEL_INPUTS}
    expected = model(inputs, training=False)
    path = tmp_path / "m.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert type(loaded) is model_class
    assert loaded.config == config
    assert len(loaded.weights) == len(model.weights)
    actual = loaded(inputs, training=False)
    assert set(actual) == set(expected)
    for name, value in expected.items():
        if name == "encoder_outputs":
            for a, e in zip(actual[name], value, strict=True):
                np.testing.assert_array_equal(a.numpy(), e.numpy())
        else:
            np.testing.assert_array_equal(actual[name].numpy(), value.numpy(), err_msg=name)
    _assert_close(actual["pooled_output"], reference["pooled_output"])


def test_loaded_keras_pretraining_model_keeps_embeddings_tied(tmp_path, config, ckpt_prefix):
    path = tmp_path / "m.keras"
    _loaded(BertPretrainingModel, config, ckpt_prefix).save(path)
    loaded = keras.models.load_model(path)
    assert loaded.masked_lm.embedding_table is loaded.bert.embeddings.word_embeddings


@pytest.mark.parametrize("model_class", [BertModel, BertPretrainingModel])
def test_get_config_from_config_round_trip(config, ckpt_prefix, features, model_class):
    model = _loaded(model_class, config, ckpt_prefix, dtype="mixed_bfloat16")
    clone = model_class.from_config(model.get_config())
    assert clone.config == config
    assert clone.name == model.name
    assert clone.dtype_policy.name == "mixed_bfloat16"
    inputs = {name: features[name] for name in MODEL_INPUTS}
    clone(inputs)
    clone.set_weights(model.get_weights())
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(clone(inputs)[name].numpy(), model(inputs)[name].numpy())


def test_model_accepts_config_as_dict(config):
    assert BertModel(config.to_dict()).config == config
    assert BertPretrainingModel(config.to_dict()).config == config


# --- Weights: names for weight decay, tied embeddings ---------------------------------------------


@pytest.mark.parametrize("model_class", [BertModel, BertPretrainingModel])
def test_weight_paths_mark_layer_norm_and_bias_for_no_decay(config, model_class):
    model = model_class(config)
    google_names = {id(variable): name for name, variable in google_variable_names(model).items()}
    assert len(google_names) == len(model.weights)
    for weight in model.weights:
        google_name = google_names[id(weight)]
        is_layer_norm = "/LayerNorm/" in google_name
        is_bias = google_name.endswith("bias")
        assert ("LayerNorm" in weight.path) == is_layer_norm, (weight.path, google_name)
        assert ("bias" in weight.path) == is_bias, (weight.path, google_name)
        # The optimizer's patterns exclude exactly what the original excluded by Google name.
        assert any(p in weight.path for p in NO_DECAY_PATTERNS) == any(
            p in google_name for p in ORIGINAL_NO_DECAY
        ), (weight.path, google_name)


def test_pretraining_model_has_no_separate_output_embedding(config, ckpt_prefix):
    model = BertPretrainingModel(config)
    names = google_variable_names(model)
    assert len(model.weights) == len(names) == len(tf.train.list_variables(ckpt_prefix))
    vocab_tables = [
        w for w in model.weights if tuple(w.shape) == (config.vocab_size, config.hidden_size)
    ]
    assert len(vocab_tables) == 1
    assert vocab_tables[0] is model.bert.embeddings.word_embeddings
    assert model.masked_lm.embedding_table is model.bert.embeddings.word_embeddings


def test_masked_lm_logits_use_the_word_embeddings(config, ckpt_prefix, features):
    model = _loaded(BertPretrainingModel, config, ckpt_prefix)
    inputs = {name: features[name] for name in MODEL_INPUTS}
    before = model(inputs, training=False)
    # A vocabulary row no input uses: the encoder cannot see the change, only the tied output layer.
    unused_id = sorted(set(range(config.vocab_size)) - set(features["input_ids"].numpy().ravel()))[
        0
    ]
    table = model.bert.embeddings.word_embeddings
    table.assign(
        tf.tensor_scatter_nd_update(table, [[unused_id]], [tf.fill([config.hidden_size], 3.0)])
    )
    after = model(inputs, training=False)
    np.testing.assert_array_equal(
        after["sequence_output"].numpy(), before["sequence_output"].numpy()
    )
    changed = np.abs(after["masked_lm_log_probs"].numpy() - before["masked_lm_log_probs"].numpy())
    assert changed[..., unused_id].min() > 1e-3


@pytest.mark.parametrize("heads", [2, 4])  # head sizes 16 and 8: 1/sqrt(8) is inexact in bfloat16
def test_bfloat16_inference_attention_is_float64_attention_and_ignores_padding(heads):
    """Under mixed_bfloat16 inference the softmax runs in bfloat16 (issue 44). Its context must be
    float64 attention over the same bfloat16-rounded inputs and kernels to bfloat16 rounding, and
    the hidden states of padding positions must not reach any other position."""
    from bert_tf.layers.attention import SelfAttention

    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        layer = SelfAttention(hidden_size=32, num_attention_heads=heads)
        layer.build((None, None, 32))
    finally:
        keras.config.set_dtype_policy("float32")
    rng = np.random.default_rng(4)
    for dense in (layer.query, layer.key, layer.value):  # scores of a few units, not BERT's ~0
        dense.kernel.assign(rng.normal(size=(32, 32)) * 0.2)
        dense.bias.assign(rng.normal(size=32) * 0.1)
    x = tf.cast(tf.cast(rng.normal(size=(2, 6, 32)), tf.bfloat16), tf.float64).numpy()
    mask = np.array([[1] * 6, [1, 1, 1, 1, 0, 0]], np.int32)
    out = tf.cast(layer(tf.constant(x, tf.bfloat16), mask, training=False), tf.float64).numpy()

    def weights(dense):  # the kernel as bfloat16 computes with it
        kernel = tf.cast(tf.cast(dense.kernel, tf.bfloat16), tf.float64).numpy()
        return kernel, tf.cast(tf.cast(dense.bias, tf.bfloat16), tf.float64).numpy()

    q, k, v = (
        (x @ w + b).reshape(2, 6, heads, -1).transpose(0, 2, 1, 3)
        for w, b in map(weights, (layer.query, layer.key, layer.value))
    )
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(32 // heads)
    scores = scores + (1.0 - mask[:, None, None, :]) * -10000.0
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    expected = (probs @ v).transpose(0, 2, 1, 3).reshape(2, 6, 32)
    # Contexts up to 2.5 here: one bfloat16 step there is 0.01, and 0.011 and 0.017 were measured at
    # the two head sizes. Unscaled scores (a fault) put it 1.0 to 1.5 off.
    np.testing.assert_allclose(out, expected, atol=0.05)
    assert np.abs(out - expected).max() > 0  # it did compute in bfloat16

    moved = x.copy()
    moved[1, 4:] = rng.normal(size=(2, 32)) * 3  # padding positions of the second example
    again = tf.cast(
        layer(tf.constant(moved, tf.bfloat16), mask, training=False), tf.float64
    ).numpy()
    np.testing.assert_array_equal(again[:, :4], out[:, :4])
    np.testing.assert_array_equal(again[0], out[0])


def test_a_fresh_model_draws_every_weight_independently(config):
    """The original draws each variable from its own truncated normal (stddev initializer_range).
    Keras repeats an initializer object's values, so one shared by several weights would start
    query, key and value equal, and the position table as a copy of the word table."""
    keras.utils.set_random_seed(0)
    model = BertModel(config)
    model({"input_ids": tf.constant([[1, 2, 3]])})
    weights = {w.path: np.asarray(w.numpy()) for w in model.weights}
    matrices = {path: w for path, w in weights.items() if w.ndim == 2}
    flat = sorted(matrices.items())
    for i, (path_a, a) in enumerate(flat):
        for path_b, b in flat[i + 1 :]:
            rows = min(a.shape[0], b.shape[0])
            cols = min(a.shape[1], b.shape[1])
            assert not np.array_equal(a[:rows, :cols], b[:rows, :cols]), (path_a, path_b)
    values = np.concatenate([w.ravel() for w in matrices.values()])
    assert np.abs(values).max() <= 2 * config.initializer_range + 1e-7  # truncated at 2 stddev
    assert abs(values.std() / config.initializer_range - 0.88) < 0.05  # truncated normal's std
