"""The teacher: a run_classifier.py output folder, checked, and its logits of texts, cached by text.

The logits are computed once per text and teacher and kept in the student's output folder
(`teacher_logits/<teacher key>/<shard>.npz`, each shard written atomically as it is done), so that a
run stopped while the teacher works, or a later run with more texts, computes only what is missing.
The teacher key hashes the teacher's task.json and its checkpoint's index (which holds a checksum
of every weight): another teacher, or the same one trained on, gets a folder of its own.

N = texts, L = labels (1 for regression), B = batch, S = the teacher's max_seq_length.
"""

import dataclasses
import hashlib
import json
import os
import time

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import file_io
from bert_tf.checkpoints import restore_init_checkpoint
from bert_tf.errors import InputError
from bert_tf.models.networks.task_info import TASK_FILE, VOCAB_FILE, read_task_info
from bert_tf.tasks.classification import multi_label
from bert_tf.tasks.classification import task as classification
from bert_tf.tasks.classification.data.features import convert_example_to_feature
from bert_tf.tokenization import FullTokenizer

CACHE_FOLDER = "teacher_logits"
# Texts per cache shard (each written as soon as it is done), texts per forward pass.
SHARD_TEXTS = 1024
BATCH_SIZE = 32
# Seconds between the progress lines while the teacher computes.
PROGRESS_SECONDS = 30.0

# The teachers a student learns from: run_classifier.py's tasks, by task.json's model_type.
_SPECS = {spec.name: spec for spec in (classification.SPEC, multi_label.SPEC)}
MULTI_LABEL = multi_label.SPEC.name


@dataclasses.dataclass
class Teacher:
    """A teacher's run folder: its TaskInfo, latest checkpoint and vocab.txt."""

    folder: str
    info: object  # run_files.TaskInfo
    checkpoint: str  # the latest checkpoint's prefix
    vocab_file: str
    _model: object = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def kind(self):
        """ "single_label", "multi_label" or "regression" (tasks/distillation/loss.py's KINDS)."""
        if self.info.model_type == MULTI_LABEL:
            return "multi_label"
        return "regression" if self.info.settings.is_regression else "single_label"

    def key(self):
        """What identifies the teacher's outputs: a hash of its task.json and checkpoint index."""
        digest = hashlib.sha256()
        for path in (os.path.join(self.folder, TASK_FILE), self.checkpoint + ".index"):
            with file_io.open_binary(path) as f:
                digest.update(f.read())
        return digest.hexdigest()[:16]

    def model(self):
        """The teacher's model (its task's), restored from its checkpoint on first use."""
        if self._model is None:
            self._model = _SPECS[self.info.model_type].build_model(self.info.bert_config, self.info)
            restore_init_checkpoint(self._model, self.checkpoint, "required")
        return self._model


def read_teacher(folder):
    """The Teacher of --teacher_dir, checked before any work.

    Raises:
      InputError: one line naming --teacher_dir, when it is not a run_classifier.py output folder
        with a trained checkpoint (no task.json, another task, no checkpoint, no vocab.txt), or
        reads texts in windows.
    """
    flag = f"--teacher_dir={folder}"
    if not file_io.exists(folder) or not tf.io.gfile.isdir(folder):
        raise InputError(f"{flag} does not exist")
    info = read_task_info(folder)
    if info is None:
        raise InputError(f"{flag} is not a run_classifier.py output_dir: it has no {TASK_FILE}")
    if info.model_type not in _SPECS:
        raise InputError(
            f"{flag} is a {info.model_type} run ({TASK_FILE}), not a classifier's: the teacher is "
            "a run_classifier.py output_dir"
        )
    if info.bert_config is None:
        raise InputError(f"{flag}: its {TASK_FILE} records no bert_config")
    if info.settings.doc_stride is not None:
        raise InputError(f"{flag} reads texts in windows (--doc_stride): distil a teacher without")
    checkpoint = tf.train.latest_checkpoint(folder)
    if checkpoint is None:
        raise InputError(f"{flag} holds no checkpoint: train the teacher first (--do_train)")
    vocab_file = os.path.join(folder, VOCAB_FILE)
    if not file_io.exists(vocab_file):
        raise InputError(f"{flag} has no {VOCAB_FILE}")
    return Teacher(folder, info, checkpoint, vocab_file)


def text_key(example):
    """A text's key in the cache: a hash of its text_a and text_b."""
    text = json.dumps([example.text_a, example.text_b], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def read_cache(folder):
    """{text key: logits float32 [L]} of every shard in `folder` (empty when there is none)."""
    cached = {}
    if not file_io.exists(folder):
        return cached
    for name in sorted(tf.io.gfile.listdir(folder)):
        if name.endswith(".npz"):
            with file_io.open_binary(os.path.join(folder, name)) as f, np.load(f) as shard:
                cached.update(zip(shard["keys"].tolist(), shard["logits"], strict=True))
    return cached


def _write_shard(folder, keys, logits):
    """Writes one shard, atomically, named by its keys."""
    tf.io.gfile.makedirs(folder)
    name = hashlib.sha256("".join(keys).encode()).hexdigest()[:16] + ".npz"
    with file_io.atomic_write(os.path.join(folder, name), "wb") as f:
        np.savez(f, keys=np.array(keys), logits=np.asarray(logits, np.float32))


class _Progress:
    """A line every PROGRESS_SECONDS: texts done, their rate and the time left."""

    def __init__(self, total):
        self.total, self.start = total, time.monotonic()
        self.last = self.start

    def update(self, done):
        now = time.monotonic()
        if now - self.last < PROGRESS_SECONDS or done >= self.total:
            return
        self.last = now
        rate = done / max(now - self.start, 1e-9)
        left = (self.total - done) / max(rate, 1e-9)
        logging.info(
            "teacher logits: %d of %d texts, %.1f texts/s, about %.0f s left",
            done, self.total, rate, left,
        )  # fmt: skip


def _logits_of(model_fn, tokenizer, info, examples, on_batch):
    """The teacher's logits float32 [N, L] of `examples`, in batches cut to their longest text;
    on_batch(texts done) after each batch."""
    rows = []
    for start in range(0, len(examples), BATCH_SIZE):
        features = [
            convert_example_to_feature(
                dataclasses.replace(example, label=None), [], info.max_seq_length, tokenizer
            )
            for example in examples[start : start + BATCH_SIZE]
        ]
        longest = max(sum(feature["input_mask"]) for feature in features)
        inputs = {
            name: tf.constant([feature[name][:longest] for feature in features], tf.int32)
            for name in ("input_ids", "input_mask", "segment_ids")
        }  # [B, longest]
        rows.append(model_fn(inputs).numpy())
        on_batch(start + len(features))
    return np.concatenate(rows).astype(np.float32)


def teacher_logits(teacher, examples, cache_dir, write_cache=True):
    """The teacher's logits float32 [N, L] of `examples` (InputExamples; labels unused), each text
    computed once: from cache_dir/<teacher key>/ when there, else computed and added to it.

    Args:
      teacher: a Teacher.
      examples: N InputExamples.
      cache_dir: the cache's folder (the student's output_dir/teacher_logits).
      write_cache: add what is computed to the cache (the chief's part).
    """
    folder = os.path.join(cache_dir, teacher.key())
    cached = read_cache(folder)
    keys = [text_key(example) for example in examples]
    missing = list({key: example for key, example in zip(keys, examples, strict=True)
                    if key not in cached}.items())  # fmt: skip
    logging.info(
        "teacher logits of %d texts: %d cached in %s, %d to compute",
        len(set(keys)), len(set(keys)) - len(missing), folder, len(missing),
    )  # fmt: skip
    if missing:
        if write_cache:
            _remove_other_teachers(cache_dir, os.path.basename(folder))
        model = teacher.model()
        model_fn = tf.function(lambda inputs: model(inputs, training=False)["logits"],
                               reduce_retracing=True)  # fmt: skip
        tokenizer = FullTokenizer(teacher.vocab_file, do_lower_case=teacher.info.do_lower_case)
        progress = _Progress(len(missing))
        for start in range(0, len(missing), SHARD_TEXTS):
            shard = missing[start : start + SHARD_TEXTS]
            examples_of_shard = [example for _, example in shard]
            logits = _logits_of(
                model_fn, tokenizer, teacher.info, examples_of_shard,
                lambda done, start=start: progress.update(start + done),
            )  # fmt: skip
            shard_keys = [key for key, _ in shard]
            cached.update(zip(shard_keys, logits, strict=True))
            if write_cache:
                _write_shard(folder, shard_keys, logits)
    return np.stack([cached[key] for key in keys]).astype(np.float32)


def _remove_other_teachers(cache_dir, key):
    """Removes the cached logits of other teachers (the teacher changed since)."""
    if not file_io.exists(cache_dir):
        return
    for name in tf.io.gfile.listdir(cache_dir):
        name = name.rstrip("/")
        if name != key:
            logging.info("removing the cached logits of another teacher: %s", name)
            tf.io.gfile.rmtree(os.path.join(cache_dir, name))
