"""The path and window flags several scripts share, each declared once: a settings class per flag.

A script's settings class derives from the classes of the shared flags it takes (its flags are the
fields, bert_tf/settings.py); where its use of one differs, it says so with `changed(...)` (its own
default or help text, e.g. SQuAD's `--doc_stride` of 128), never by declaring the field again.

    bert_config_file, init_checkpoint
                   run_*.py, extract_features.py, export_saved_model.py, convert_checkpoint.py
    vocab_file     the same, and create_pretraining_data.py
    data_dir       run_classifier.py, run_ner.py, run_swag.py, run_embedding.py (each its layout)
    tfds_data_dir  run_classifier.py, run_squad.py
    doc_stride     run_classifier.py, run_ner.py, run_squad.py (each its windows and default)
    objective      create_pretraining_data.py, run_pretraining.py (the same value in both)

build_vocab.py's `--vocab_file` is the file it writes, another meaning: it declares its own. Other
flags of two scripts are declared the same way beside their code
(`data.pretraining.dynamic.DynamicMaskingSetting`).
"""

import dataclasses
import os

from bert_tf import file_io
from bert_tf.errors import InputError
from bert_tf.objectives import DEFAULT_OBJECTIVE, OBJECTIVES
from bert_tf.settings import Settings, setting

# What every run_*.py writes beside its checkpoints (bert_tf.models.networks.task_info).
RUN_TASK_FILE = "task.json"


@dataclasses.dataclass(kw_only=True)
class BertConfigFileSetting(Settings):
    """--bert_config_file: the encoder's sizes (bert_config.json)."""

    bert_config_file: str | None = setting(None, "bert_config.json of the model.")


@dataclasses.dataclass(kw_only=True)
class InitCheckpointSetting(Settings):
    """--init_checkpoint: the weights a script starts from or reads."""

    init_checkpoint: str | None = setting(None, "Weights: a Google checkpoint or one of ours.")

    def run_folder(self):
        """The folder of --init_checkpoint (itself, or a prefix's) when it holds a run's task.json
        (bert_tf.models.networks.task_info.TASK_FILE), else None."""
        path = self.init_checkpoint
        if not path:
            return None
        for folder in (path, os.path.dirname(path)):
            if folder and file_io.exists(os.path.join(folder, RUN_TASK_FILE)):
                return folder
        return None

    def take_run_files(self):
        """A run dir is a whole model: --vocab_file and --bert_config_file, when absent, are the
        vocab.txt and bert_config.json the run keeps beside its checkpoints (when it has them)."""
        folder = self.run_folder()
        if folder is None:
            return
        for name, file_name in (
            ("vocab_file", "vocab.txt"),
            ("bert_config_file", "bert_config.json"),
        ):
            path = os.path.join(folder, file_name)
            if hasattr(self, name) and not getattr(self, name) and file_io.exists(path):
                setattr(self, name, path)


@dataclasses.dataclass(kw_only=True)
class VocabFileSetting(Settings):
    """--vocab_file: the WordPiece vocabulary of the model, one token a line."""

    vocab_file: str | None = setting(None, "vocab.txt the model was trained with.")


@dataclasses.dataclass(kw_only=True)
class DataDirSetting(Settings):
    """--data_dir: the folder of a task's train, dev and test files (their names: the task's)."""

    data_dir: str | None = setting(None, "Folder with the task's train, dev and test files.")

    def check_data_dir(self):
        """Raises InputError when --data_dir is not given, does not exist or is a file."""
        if not self.data_dir:
            raise InputError("--data_dir is required")
        holds = "pass the folder that holds the task's train, dev and test files"
        if not file_io.exists(self.data_dir):
            raise InputError(f"--data_dir={self.data_dir}: no such folder; {holds}")
        if not file_io.is_url(self.data_dir) and not os.path.isdir(self.data_dir):
            raise InputError(f"--data_dir={self.data_dir} is a file; {holds}")


@dataclasses.dataclass(kw_only=True)
class TfdsDataDirSetting(Settings):
    """--tfds_data_dir: where TensorFlow Datasets keeps the data --tfds_name reads."""

    tfds_data_dir: str | None = setting(None, "TensorFlow Datasets data_dir for --tfds_name.")


@dataclasses.dataclass(kw_only=True)
class DocStrideSetting(Settings):
    """--doc_stride: a text longer than a window is read as overlapping windows this far apart.

    Recorded in task.json: the export makes the run's windows.
    """

    doc_stride: int | None = setting(
        None, "Wordpieces between the starts of a long text's windows.", recorded=True
    )

    def check_doc_stride(self):
        """Raises InputError for a --doc_stride that is given and not positive."""
        if self.doc_stride is not None and self.doc_stride <= 0:
            raise InputError(f"--doc_stride must be positive, got {self.doc_stride}")


@dataclasses.dataclass(kw_only=True)
class ObjectiveSetting:
    """The --objective flag of create_pretraining_data.py and run_pretraining.py (give both the same)."""

    objective: str = setting(
        DEFAULT_OBJECTIVE,
        "Pretraining objective (BERT paper, Table 5): mlm_nsp = masked LM + next sentence (the "
        "original); mlm = masked LM alone, one continuous segment; ltr = left-to-right LM with a "
        "causal attention mask (kept in fine-tuning), no masking. Pass the same value to "
        "create_pretraining_data.py and run_pretraining.py. Default mlm_nsp.",
        choices=list(OBJECTIVES),
    )
