"""bench_latency.py's runners: each builds, in a process of its own, a call on a batch of raw strings.

A builder takes the run's setup (threads, vocab, the model's config, the export paths) and returns
(text call, ids path or None); ids path = (prepare ids from strings, call on those ids). A call
returns the sequence length it ran at. Every runner pins `threads` intra-op and inter-op threads.
"""


def _tf_threads(threads):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)


def _saved_model(setup, export):
    """(text call, ids path): an export's signatures, with only TensorFlow and TF Text imported."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer's ops)

    _tf_threads(setup["threads"])
    loaded = tf.saved_model.load(setup[export])
    serve_text = loaded.signatures["serving_default"]
    serve_ids = loaded.signatures["serve_ids"]
    preprocess = loaded.signatures["preprocess"]

    def text(texts):
        outputs = serve_text(text_a=tf.constant(texts))
        return outputs["sequence_output"].numpy().shape[1]

    def prepare_ids(texts):
        return preprocess(text_a=tf.constant(texts))

    def ids(features):
        return serve_ids(**features)["sequence_output"].numpy().shape[1]

    return text, (prepare_ids, ids)


def bert_tf(setup):
    return _saved_model(setup, "export")


def bert_tf_assume_frozen(setup):
    """The float32 export in a process that tells oneDNN its weights never change
    (TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1, TensorFlow's switch, read at the first matmul): each matmul's
    weight is blocked once and kept, as for a frozen graph (docs/serving.md)."""
    import os

    os.environ["TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"] = "1"
    return _saved_model(setup, "export")


def bert_tf_bf16(setup):
    if setup.get("export_bfloat16") is None:
        raise ImportError("this CPU has no bfloat16 matmul (AVX512_BF16 or AMX)")
    return _saved_model(setup, "export_bfloat16")


def bert_tf_bf16_assume_frozen(setup):
    """The bfloat16 export with TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 (as bert_tf_assume_frozen)."""
    import os

    os.environ["TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"] = "1"
    return bert_tf_bf16(setup)


def _litert(setup, key):
    """The .tflite of serve_ids (ids in) run by ai-edge-litert's interpreter, fed the ids that the
    export's `preprocess` makes of the strings (the text row includes that tokenization)."""
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401
    from ai_edge_litert.interpreter import Interpreter

    if setup.get(key) is None:
        raise ImportError(f"no {key} model was written")
    _tf_threads(setup["threads"])
    preprocess = tf.saved_model.load(setup["export"]).signatures["preprocess"]
    interpreter = Interpreter(model_path=setup[key], num_threads=setup["threads"])
    runner = interpreter.get_signature_runner("serve_ids")

    def prepare_ids(texts):
        features = preprocess(text_a=tf.constant(texts))
        return {name: np.asarray(value) for name, value in features.items()}

    def ids(features):
        return runner(**features)["sequence_output"].shape[1]

    def text(texts):
        return ids(prepare_ids(texts))

    return text, (prepare_ids, ids)


def litert_float32(setup):
    return _litert(setup, "litert_float32")


def litert_int8(setup):
    return _litert(setup, "litert_int8")


def _torch_model(setup):
    import torch
    import transformers

    torch.set_num_threads(setup["threads"])
    torch.set_num_interop_threads(setup["threads"])
    torch.manual_seed(0)
    config = setup["config"]
    tokenizer = transformers.BertTokenizerFast(setup["vocab_file"], do_lower_case=True)
    model = transformers.BertModel(
        transformers.BertConfig(
            vocab_size=config["vocab_size"], hidden_size=config["hidden_size"],
            num_hidden_layers=config["num_hidden_layers"],
            num_attention_heads=config["num_attention_heads"],
            intermediate_size=config["intermediate_size"], hidden_act="gelu_new",
            max_position_embeddings=config["max_position_embeddings"],
        )
    ).eval()  # fmt: skip
    return tokenizer, model


def _torch_runner(setup, model, tokenizer, context):
    import torch

    max_length = setup["max_seq_length"]

    def prepare_ids(texts):
        return tokenizer(
            texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt"
        )

    def ids(features):
        with torch.inference_mode(), context():
            return model(**features).last_hidden_state.shape[1]

    def text(texts):
        return ids(prepare_ids(texts))

    return text, (prepare_ids, ids)


def transformers(setup):
    import contextlib

    tokenizer, model = _torch_model(setup)
    return _torch_runner(setup, model, tokenizer, contextlib.nullcontext)


def transformers_bf16(setup):
    """torch's bfloat16 autocast on CPU (its matmuls in bfloat16, as our bfloat16 export's)."""
    import functools

    import torch

    if not setup.get("export_bfloat16"):
        raise ImportError("this CPU has no bfloat16 matmul (AVX512_BF16 or AMX)")
    tokenizer, model = _torch_model(setup)
    autocast = functools.partial(torch.autocast, "cpu", dtype=torch.bfloat16)
    return _torch_runner(setup, model, tokenizer, autocast)


def transformers_int8(setup):
    """torch's dynamic int8 quantization of every Linear (int8 weights, activations quantized per call)."""
    import contextlib

    import torch

    tokenizer, model = _torch_model(setup)
    model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    return _torch_runner(setup, model, tokenizer, contextlib.nullcontext)


def keras_hub(setup):
    import keras_hub
    import tensorflow as tf

    _tf_threads(setup["threads"])
    config = setup["config"]
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=setup["vocab_file"], lowercase=True)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config["vocab_size"], num_layers=config["num_hidden_layers"],
        num_heads=config["num_attention_heads"], hidden_dim=config["hidden_size"],
        intermediate_dim=config["intermediate_size"],
        max_sequence_length=config["max_position_embeddings"],
    )  # fmt: skip
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    keep = setup["max_seq_length"] - 2

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(texts):
        pieces = tokenizer(texts)[:, :keep]  # ragged [B, (n)]
        batch = tf.shape(texts)[:1]
        ends = [tf.fill(tf.concat([batch, [1]], 0), cls), tf.fill(tf.concat([batch, [1]], 0), sep)]
        ids = tf.concat([ends[0], tf.cast(pieces, tf.int32), ends[1]], axis=1)
        token_ids = ids.to_tensor()  # [B, S], padded to the batch's longest
        padding_mask = tf.ones_like(ids, tf.bool).to_tensor()
        features = {
            "token_ids": token_ids,
            "padding_mask": padding_mask,
            "segment_ids": tf.zeros_like(token_ids),
        }
        return backbone(features, training=False)["sequence_output"]

    def text(texts):
        return serve(tf.constant(texts)).numpy().shape[1]

    return text, None


# runner name: (builder, text row, ids row or None)
RUNNERS = {
    "bert_tf": (bert_tf, "bert_tf text (serving_default)", "bert_tf ids (serve_ids)"),
    "bert_tf_assume_frozen": (
        bert_tf_assume_frozen,
        "bert_tf text, TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1",
        "bert_tf ids, TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1",
    ),
    "bert_tf_bf16": (bert_tf_bf16, "bert_tf bf16 text", "bert_tf bf16 ids"),
    "bert_tf_bf16_assume_frozen": (
        bert_tf_bf16_assume_frozen,
        "bert_tf bf16 text, TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1",
        "bert_tf bf16 ids, TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1",
    ),
    "litert_float32": (litert_float32, "bert_tf LiteRT float32 text", "bert_tf LiteRT float32 ids"),
    "litert_int8": (litert_int8, "bert_tf LiteRT int8 text", "bert_tf LiteRT int8 ids"),
    "transformers": (
        transformers,
        "transformers text (tokenizer + model)",
        "transformers ids (model)",
    ),
    "transformers_bf16": (transformers_bf16, "transformers bf16 autocast text", None),
    "transformers_int8": (transformers_int8, "transformers dynamic int8 text", None),
    "keras_hub": (keras_hub, "keras-hub text (tokenizer + packer + backbone)", None),
}
