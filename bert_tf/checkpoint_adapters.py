"""LoRA adapters in our training checkpoints (bert_tf.checkpoints' restore path reads them here).

A LoRA run's checkpoint holds, beside each adapted Dense's frozen kernel W, its adapters A and B
(`lora_kernel_a`, `lora_kernel_b`, bert_tf.adapters). A model with adapters restores them; a model
without gets W + A @ B (alpha = rank, as bert_tf.adapters sets it): the trained model, plain.
"""

from bert_tf.errors import InputError
from bert_tf.modeling import BertModel


def encoder_dense_layers(bert):
    """{Google name prefix: keras.layers.Dense} of a BertModel's blocks (what LoRA can adapt)."""
    layers = {}
    for i, block in enumerate(bert.encoder_layers):
        prefix = f"bert/encoder/layer_{i}"
        for part in ("query", "key", "value"):
            layers[f"{prefix}/attention/self/{part}"] = getattr(block.attention, part)
        layers[f"{prefix}/attention/output/dense"] = block.attention_output
        layers[f"{prefix}/intermediate/dense"] = block.intermediate
        layers[f"{prefix}/output/dense"] = block.output_dense
    return layers


def stored_adapters(model, stored, paths):
    """{Google prefix of a Dense: (checkpoint key of A, of B)} of the adapters a checkpoint holds.

    Args:
      model: the model being restored (a BertModel or a model with `.bert`).
      stored: {object path below the checkpoint's "model": tensor key}.
      paths: {id(object): [its object paths in `model`]}.
    """
    bert = model if isinstance(model, BertModel) else model.bert
    keys = {}
    for name, dense in encoder_dense_layers(bert).items():
        # A BertModel's own checkpoint (an embedder's) or a task model's (the encoder is its .bert).
        candidates = [c for path in paths[id(dense)] for c in (path, f"bert/{path}")]
        for path in candidates:
            if f"{path}/lora_kernel_a" in stored:
                keys[name] = tuple(stored[f"{path}/lora_kernel_{ab}"] for ab in "ab")
                break
    return keys


def adapter_restores(model, checkpoint, values, restored, new, resuming):
    """The LoRA adapters' part of a restore; returns [(kernel, key of A, key of B)] to merge.

    A model with adapters takes the checkpoint's (a resumed LoRA run), or keeps its fresh ones when
    the checkpoint has none (a base); a model without adapters reading a LoRA run's checkpoint
    gets each adapter merged into its kernel, the trained model as a plain one.
    """
    bert = model if isinstance(model, BertModel) else model.bert
    layers = encoder_dense_layers(bert)
    adapted = {name: d for name, d in layers.items() if getattr(d, "lora_enabled", False)}
    stored = checkpoint.adapter_keys
    if resuming and set(adapted) != set(stored):
        raise InputError(
            f"{checkpoint.prefix} holds LoRA adapters on {len(stored)} projection(s) but this run "
            f"has them on {len(adapted)}: resume with the --lora_rank and --lora_target_names "
            "it was trained with"
        )
    if not stored:
        if adapted:
            new.append("LoRA adapters (the checkpoint has none)")
        return []
    merges = []
    for name, keys in stored.items():
        dense = adapted.get(name)
        if dense is None:
            merges.append((values[f"{name}/kernel"][0], *keys))
            continue
        for variable, key in zip((dense.lora_kernel_a, dense.lora_kernel_b), keys, strict=True):
            shape = list(checkpoint.shapes[key])
            if shape != list(variable.shape):
                raise InputError(
                    f"{checkpoint.prefix}: the LoRA adapter {name} has shape {shape} in the "
                    f"checkpoint but {list(variable.shape)} in the model (another --lora_rank?)"
                )
            values[f"{name}/{variable.name}"] = (variable, key)
    restored.append("LoRA adapters" if not merges else "LoRA adapters (merged into the kernels)")
    return merges
