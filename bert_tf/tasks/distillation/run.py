"""run_distillation.py's run: a classifier's run whose student learns from a teacher's logits.

The run is run_classifier.py's (a FineTuningRun of tasks/classification/task.py's ClassifierTask,
or of a MultiLabelTask for a multi-label teacher), its task given a Distillation part, so its folder
is a classifier run's folder (task.json with the student's bert_config, labels.txt, vocab.txt,
checkpoints, eval_results.txt, test_results.tsv), its training is THE loop with exact resume, and
export_saved_model.py, convert_checkpoint.py and from_preset take it as they take a classifier run.
What differs:
  - the student's encoder: the teacher's config with fewer layers, starting from the teacher's
    weights (written once to student_init/ in Google's format, read as --init_checkpoint), or
    another BERT's (--student_config, --student_init_checkpoint);
  - the training features: the labelled texts and the transfer texts, each with the teacher's
    logits (tasks/distillation/teacher.py, cached by text) and a hard weight (1 labelled, 0 not);
  - the loss: tasks/distillation/loss.py's.
Evaluation, prediction and the export are the classifier's.
"""

import dataclasses
import functools
import os

import tensorflow as tf
from absl import logging

from bert_tf import file_io
from bert_tf.checkpoints import save_google_checkpoint
from bert_tf.data.feature_cache import file_identity
from bert_tf.data.records import serialize_values
from bert_tf.errors import InputError
from bert_tf.models.distillation import (
    choose_layers,
    copy_teacher_weights,
    distillation_loss,
    student_config,
)
from bert_tf.tasks.classification import multi_label
from bert_tf.tasks.classification import task as classification
from bert_tf.tasks.classification.data.processor import InputExample
from bert_tf.tasks.distillation.teacher import CACHE_FOLDER, read_teacher, teacher_logits
from bert_tf.tasks.finetuning import FineTuningRun

STUDENT_CONFIG_FILE = "student_bert_config.json"
STUDENT_INIT_FOLDER = "student_init"
# The training features' own format in the cache key (the classifier's, with the teacher's part).
TEACHER_FEATURES = "distillation: teacher_logits, hard_weight 1"


def read_transfer_file(path, is_pair):
    """The InputExamples (no label) of --transfer_file: one text a line, blank lines skipped;
    text_a<TAB>text_b for a pair task.

    Raises:
      InputError: naming the file (and line): missing, not UTF-8, no text, or a pair line
        without its tab.
    """
    flag = f"--transfer_file={path}"
    if not file_io.exists(path):
        raise InputError(f"{flag} does not exist")
    examples = []
    try:
        for number, line in file_io.read_lines(path):
            if not line.strip():
                continue
            text_b = None
            if is_pair:
                if "\t" not in line:
                    raise InputError(
                        f"{path}:{number}: the task reads text pairs: text_a<TAB>text_b"
                    )
                line, text_b = line.split("\t", 1)
            examples.append(
                InputExample(f"transfer-{number}", line, text_b, None, f"{path}:{number}")
            )
    except InputError as error:
        raise InputError(f"--transfer_file: {error}") from None
    if not examples:
        raise InputError(f"{flag} holds no text (an empty file, or blank lines only)")
    return examples


def make_run(settings):
    """The run of run_distillation.py's settings, made and checked (the teacher, the student's
    layers and the transfer file first, each error one line), not yet started."""
    settings.check_distillation()
    settings.check_output_dir()
    teacher = read_teacher(settings.teacher_dir)
    layers, init_checkpoint = None, settings.student_init_checkpoint
    if settings.student_config:
        if not file_io.exists(settings.student_config):
            raise InputError(f"--student_config={settings.student_config} does not exist")
        bert_config_file = settings.student_config
    else:
        teacher_layers = teacher.info.bert_config.num_hidden_layers
        layers = choose_layers(teacher_layers, settings.student_layers, settings.student_layer_map)
        bert_config_file = os.path.join(settings.output_dir, STUDENT_CONFIG_FILE)
    transfer = []
    if settings.transfer_file:
        transfer = read_transfer_file(settings.transfer_file, teacher.info.settings.is_pair)
    vocab_file = settings.vocab_file or teacher.vocab_file
    labels = settings.labels
    if labels is None and teacher.info.labels and settings.task_name in ("tsv", "csv"):
        labels = ",".join(teacher.info.labels)  # the student's label ids are the teacher's
    settings = dataclasses.replace(
        settings,
        bert_config_file=bert_config_file,
        init_checkpoint=init_checkpoint,
        vocab_file=vocab_file,
        do_lower_case=teacher.info.do_lower_case
        if not settings.vocab_file
        else settings.do_lower_case,
        multi_label=teacher.kind == "multi_label",
        labels=labels,
    )
    if layers is not None:
        config_of_student = student_config(teacher.info.bert_config, layers)
        file_io.write_text(bert_config_file, config_of_student.to_json_string())
    task_class = (
        multi_label.MultiLabelTask
        if teacher.kind == "multi_label"
        else classification.ClassifierTask
    )
    distillation = Distillation(teacher, layers, settings.transfer_file or None, transfer)
    return FineTuningRun(settings, functools.partial(task_class, distillation=distillation))


def write_student_init(teacher_model, student_model, layers, folder):
    """Writes the student's first weights (the teacher's, copy_teacher_weights) to
    folder/bert_model.ckpt in Google's format, atomically, head included; returns the prefix."""
    copy_teacher_weights(teacher_model, student_model, layers)
    prefix = save_google_checkpoint(student_model, os.path.join(folder, "bert_model.ckpt"))
    logging.info("the student starts from the teacher's layers %s: %s", layers, prefix)
    return prefix


class Distillation:
    """What a distillation run changes in its classifier task: a part given to ClassifierTask
    (its `distillation`), which calls it with what it needs.

    Args:
      teacher: the teacher's run folder (teacher.read_teacher).
      layers: the teacher's layers the student starts from, or None (--student_config).
      transfer_file: --transfer_file, or None.
      transfer_examples: its InputExamples (no labels), or [].
    """

    def __init__(self, teacher, layers, transfer_file, transfer_examples):
        self.teacher, self.layers = teacher, layers
        self.transfer_file, self.transfer_examples = transfer_file, transfer_examples

    @property
    def kind(self):
        return self.teacher.kind

    def check_task(self, task):
        """The data's task (a ClassifierTask, set up) is the teacher's: its labels in the same
        order, pairs or not."""
        info, flag = self.teacher.info, f"--teacher_dir={self.teacher.folder}"
        if task.is_regression != bool(info.settings.is_regression):
            kinds = ("a classification", "a regression")
            raise InputError(
                f"{flag} is {kinds[bool(info.settings.is_regression)]} model, the data "
                f"{kinds[task.is_regression]} task"
            )
        if not task.is_regression and list(task.labels) != list(info.labels or []):
            raise InputError(f"{flag}: its labels {info.labels} are not the data's {task.labels}")
        if bool(task.processor.is_pair) != bool(info.settings.is_pair):
            raise InputError(f"{flag}: the teacher and the data disagree on text pairs")

    def student_init_prefix(self, settings):
        """Where a new run that trains from the teacher's layers writes the student's first
        weights, or None (--student_config, no training)."""
        if not settings.do_train or self.layers is None:
            return None
        return os.path.join(settings.output_dir, STUDENT_INIT_FOLDER, "bert_model.ckpt")

    def with_student_init(self, settings, resumes):
        """`settings` with --init_checkpoint the student's first weights, for a new run that
        trains from the teacher's layers (written by write_student_init before it is read)."""
        prefix = self.student_init_prefix(settings)
        if prefix is None or resumes:
            return settings
        return dataclasses.replace(settings, init_checkpoint=prefix)

    def write_student_init(self, run):
        """Writes the student's first weights (the teacher's layers) where the run's
        --init_checkpoint names them (with_student_init), before the run checks it."""
        prefix = self.student_init_prefix(run.settings)
        if prefix is not None and run.settings.init_checkpoint == prefix:
            write_student_init(
                self.teacher.model(), run.build_model(), self.layers, os.path.dirname(prefix)
            )

    def feature_settings(self, key):
        """The training features' cache key: the classifier's `key`, the teacher and the transfer
        file."""
        transfer = self.transfer_file
        return {
            **key,
            "distillation": TEACHER_FEATURES,
            "teacher": self.teacher.key(),
            "transfer_file": file_identity(transfer) if transfer else None,
        }

    def make_records(self, task):
        """The training records of `task` (a ClassifierTask): its labelled texts and the transfer
        texts, each with the teacher's logits and a hard weight (1 labelled, 0 not); their info."""
        run = task.run
        labelled = run.step_data("train")
        examples = [*labelled, *self.transfer_examples]
        logits = teacher_logits(
            self.teacher,
            examples,
            os.path.join(run.settings.output_dir, CACHE_FOLDER),
            write_cache=run.is_chief,
        )
        spec, records = task.feature_spec(True), []
        for index, (example, row) in enumerate(zip(examples, logits, strict=True)):
            hard_weight = 1.0 if index < len(labelled) else 0.0  # transfer texts: no label
            for feature in task.example_features(example, index):
                feature.update(teacher_logits=row.tolist(), hard_weight=hard_weight)
                records.append(serialize_values(feature, spec))
        info = {
            "num_real_examples": len(records),
            "texts": len(examples),
            "transfer_texts": len(self.transfer_examples),
        }
        return records, info

    def feature_spec(self, spec, outputs):
        """The training records' spec: a text's `spec` with the teacher's `outputs` logits and
        the hard weight."""
        return {
            **spec,
            "teacher_logits": tf.io.FixedLenFeature([outputs], tf.float32),
            "hard_weight": tf.io.FixedLenFeature([], tf.float32),
        }

    def loss(self, outputs, features, normalizers, settings):
        """The student's loss of a batch (bert_tf.models.distillation.distillation_loss)."""
        return distillation_loss(
            outputs["logits"],
            features["teacher_logits"],
            features["label_ids"],
            features["hard_weight"],
            normalizers["examples"],
            kind=self.kind,
            temperature=settings.temperature,
            hard_label_weight=settings.hard_label_weight,
        )

    def add_to_outcome(self, outcome, bert_config):
        """The student's layers and transfer texts, in the run's outcome (and the log)."""
        outcome["student"] = {
            "teacher_layers": self.layers,
            "num_hidden_layers": bert_config.num_hidden_layers,
            "transfer_texts": len(self.transfer_examples),
        }
        logging.info("student: %s", outcome["student"])
