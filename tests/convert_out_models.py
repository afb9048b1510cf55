"""The tiny models that tests/test_convert_out.py converts out, made the same way by
tests/fixtures/make_huggingface_heads_outputs.py (which records transformers' outputs for them).

Each is tests/fixtures/google_ckpt_tiny's encoder with a head of seeded weights, written as a
Google-format checkpoint with the task.json a run writes beside it. The inputs are reference.npz's
(4 sequences of 23 ids, two segments), reshaped into 2 questions of 2 choices for multiple choice.
"""

import pathlib

import numpy as np

from bert_tf.checkpoints import restore_init_checkpoint, save_google_checkpoint
from bert_tf.formats.sentence_transformers_folder import EMBEDDING_FILE
from bert_tf.modeling import BertConfig
from bert_tf.models.networks.task_info import TaskInfo, write_task_info
from bert_tf.tasks import get_task

FIXTURES_DIR = pathlib.Path(__file__).resolve().parent / "fixtures"
GOOGLE_CKPT_DIR = FIXTURES_DIR / "google_ckpt_tiny"
OUTPUTS = FIXTURES_DIR / "huggingface_heads" / "outputs.npz"
VOCAB_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(96)]
# Texts of the w-vocabulary for the sentence-transformers folder (tokenized by each library).
EMBEDDING_TEXTS = ["w1 w2 w3", "w10 w11 w12 w13 w14 w15", "w95", "W7 w8, w9."]

# {case: TaskInfo keywords}: every head that transformers has, on the same encoder.
TASK_CASES = {
    "classifier": dict(
        model_type="classifier", labels=["contradiction", "entailment", "neutral"], is_pair=True
    ),
    "regression": dict(model_type="classifier", labels=None, is_pair=True, is_regression=True),
    "multi_label": dict(model_type="multi_label", labels=["art", "law", "sport", "war"]),
    "tagger": dict(model_type="tagger", labels=["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]),
    "squad": dict(model_type="squad"),
    "multiple_choice": dict(model_type="multiple_choice"),
}


def write_vocab(folder):
    path = pathlib.Path(folder) / "vocab.txt"
    path.write_text("\n".join(VOCAB_TOKENS) + "\n")
    return str(path)


def reference_inputs():
    """reference.npz's input_ids, input_mask and segment_ids, int32 [4, 23]."""
    with np.load(GOOGLE_CKPT_DIR / "reference.npz") as reference:
        return {
            "input_ids": reference["input_ids"],
            "input_mask": reference["input_mask"],
            "segment_ids": reference["segment_ids"],
        }


def bert_config():
    return BertConfig.from_json_file(str(GOOGLE_CKPT_DIR / "bert_config.json"))


def task_model(case):
    """(the case's task model, its TaskInfo): the fixture's encoder and a head of seeded weights."""
    info = TaskInfo(bert_config=bert_config(), max_seq_length=23, **TASK_CASES[case])
    model = get_task(info.model_type).build_model(info.bert_config, info)
    restore_init_checkpoint(model, str(GOOGLE_CKPT_DIR / "bert_model.ckpt"), heads="skip")
    rng = np.random.default_rng(sorted(TASK_CASES).index(case))
    for variable in model.head.google_variables().values():
        variable.assign(rng.normal(0.0, 0.5, variable.shape).astype(np.float32))
    return model, info


def write_task_checkpoint(case, folder):
    """Writes the case's model as folder/bert_model.ckpt.* + task.json; returns (model, folder)."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model, info = task_model(case)
    save_google_checkpoint(model, str(folder / "bert_model.ckpt"))
    write_task_info(str(folder), info)
    return model, folder


def write_embedding_release(folder, encoder):
    """A release of `encoder` (a BertModel) with an embedding.json, as a converted
    sentence-transformers folder has: mean pooling, normalized, 16 word pieces at most."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_google_checkpoint(encoder, str(folder / "bert_model.ckpt"))
    (folder / "bert_config.json").write_text(bert_config().to_json_string())
    (folder / EMBEDDING_FILE).write_text(
        '{"pooling": "mean", "normalize": true, "max_seq_length": 16, "do_lower_case": true}\n'
    )
    return folder


def task_logits(model, case, inputs):
    """Our model's logits on `inputs`, shaped as transformers returns them."""
    if case == "multiple_choice":
        logits = model.logits(inputs).numpy()  # [4, 1]
        return logits.reshape(2, 2)
    logits = model.logits(inputs).numpy()
    if case == "squad":  # [4, 23, 2] -> start and end, [2, 4, 23]
        return np.moveaxis(logits, -1, 0)
    return logits
