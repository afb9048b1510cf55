"""The settings of each fine-tuning script: its flags, each declared once, and its part of
task.json (the fields declared `recorded`).

A script's flags are read here and in bert_tf/shared_settings.py, which declares those several scripts
share (FineTuningSettings, --data_dir, --tfds_data_dir, --doc_stride, ...); a class that changes a
shared flag's default or help declares that field again here (`restated`). Every class here derives
from tasks/run_settings.py's TaskSettings (FineTuningSettings and the checks that need the model).

They sit below every task folder and import none. task.json's reader (bert_tf.models.networks.
task_info) knows each task's recorded settings from its own plain table, RECORDED_SETTINGS, which
tests/test_task_info.py holds equal to the recorded fields of SETTINGS_CLASSES. A task module names
its settings class in its TaskSpec (`settings_class`); tests/test_task_contract.py checks that
SETTINGS_CLASSES and bert_tf.tasks.TASKS agree.
"""

import dataclasses

from bert_tf.errors import InputError
from bert_tf.models.networks.embedder_network import DEFAULT_SCALE
from bert_tf.models.networks.feature_head import DEFAULT_LSTM_SIZE
from bert_tf.models.networks.squad_serving import SQUAD_MAX_SEQ_LENGTH, check_windows
from bert_tf.models.networks.task_info import FEATURE_LAYERS, POOLINGS, WINDOW_COMBINATIONS
from bert_tf.settings import derived, restated, setting
from bert_tf.shared_settings import (
    DataDirSetting,
    DocStrideSetting,
    RunSettings,
    TfdsDataDirSetting,
    VocabFileSetting,
)
from bert_tf.tasks.run_settings import TaskSettings


@dataclasses.dataclass(kw_only=True)
class DataSource(DataDirSetting, TfdsDataDirSetting):
    """Where run_classifier.py's examples come from: the data flags (read by
    tasks/classification/data's `get_processor`)."""

    data_dir: str | None = restated(
        DataDirSetting, "data_dir", help="Folder with the task's files (GLUE layout or yours)."
    )
    task_name: str | None = setting(
        None,
        "cola, sst-2, mrpc, qqp, sts-b, mnli, mnli-mm, qnli, rte, wnli, ax, xnli; tsv / csv for "
        "your own files (train/dev/test.tsv or .csv in --data_dir); tfds for another --tfds_name.",
    )
    text_a_column: str | None = setting(
        None, "tsv/csv: column of the first text (0-based index or header name)."
    )
    text_b_column: str | None = setting(
        None, "tsv/csv: column of the second text, for pair tasks (optional)."
    )
    label_column: str | None = setting(None, "tsv/csv: column of the label.")
    has_header: bool = setting(False, "tsv/csv: the first line of each file is a header.")
    labels: str | None = setting(
        None, "tsv/csv: the label set, comma-separated (default: found in train)."
    )
    tfds_name: str | None = setting(
        None, "Read a TensorFlow Datasets GLUE config instead, e.g. glue/mrpc."
    )
    xnli_language: str = setting("zh", "xnli: the language to train and evaluate on.")
    skip_malformed_lines: bool = setting(
        False,
        "Skip (and count in the log) data lines with too few columns instead of stopping there.",
    )


@dataclasses.dataclass
class SquadWindowSettings(DocStrideSetting):
    """run_squad.py's windowing and n-best settings, each declared once: its flags (SquadSettings
    derives from this), its part of task.json (recorded) and the export's (bert_tf/models/networks/
    squad_serving.py's QaSettings)."""

    doc_stride: int | None = restated(
        DocStrideSetting,
        "doc_stride",
        128,
        help="Wordpieces between the starts of a long context's windows.",
    )
    max_query_length: int = setting(
        64, "Question wordpieces kept; longer questions are cut to this.", recorded=True
    )
    n_best_size: int = setting(
        20,
        "Starts and ends considered per window, and answers in nbest_predictions.",
        recorded=True,
    )
    max_answer_length: int = setting(30, "Longest answer, in wordpieces.", recorded=True)
    version_2_with_negative: bool = setting(
        False, "SQuAD 2.0: some questions have no answer.", recorded=True
    )
    null_score_diff_threshold: float = setting(
        0.0, 'SQuAD 2.0: answer "" when null score - best answer score exceeds this.', recorded=True
    )

    def check_windows(self, max_seq_length):
        """run_squad.py's rules (squad_serving.check_windows, the export's too).

        Raises:
          InputError: naming the flag.
        """
        check_windows(self, max_seq_length)


@dataclasses.dataclass(kw_only=True)
class ClassifierSettings(TaskSettings, DataSource, DocStrideSetting):
    """run_classifier.py's settings: the shared fine-tuning ones plus where the data comes from."""

    doc_stride: int | None = restated(
        DocStrideSetting,
        "doc_stride",
        help="Classify each text whole: a text longer than --max_seq_length - 2 wordpieces becomes "
        "windows of that many, starting this many apart (as run_squad.py's). Training uses every "
        "window (steps count windows); eval, predict and the export combine a text's windows "
        "(--window_combination). Single-text tasks. Default: cut texts, as the original; a run "
        "that does not train, or resumes, takes the windows of the checkpoint's run (its "
        "task.json), as its export does.",
    )
    class_weights: str | None = setting(
        None,
        "Weights of the labels in the training loss, for imbalanced data: none, auto or one number "
        "per label, comma-separated, in label order. auto: n / (labels * n_label) for one label "
        "per text; with --multi_label, each label's positives weighed by n_negative / n_positive. "
        "Default: auto with --multi_label=True (sparse labels learn nothing without it), else "
        "none. Classification only; eval_loss stays unweighted.",
    )
    window_combination: str | None = setting(
        None,
        "How a text's windows combine: weighted_mean (of their log-probabilities, each window "
        "weighted by the text's wordpieces it holds), mean (unweighted) or max (of each label's "
        "probability), renormalized; regression averages (weighted for weighted_mean). Default: "
        "the checkpoint's run's (its task.json) when the run does not train or resumes, else "
        "weighted_mean.",
        choices=WINDOW_COMBINATIONS,
        recorded=True,
        recorded_default="mean",  # a run that recorded none had the rule before weighted_mean
    )
    is_pair: bool = derived(False, "Two texts per example (the task's data).")
    is_regression: bool = derived(False, "A score per example instead of labels (the task's).")

    def check(self):
        super().check()
        if self.task_name and not self.tfds_name and not self.data_dir:
            raise InputError("--data_dir is required with --task_name")
        self.check_doc_stride()


@dataclasses.dataclass(kw_only=True)
class MultiLabelSettings(ClassifierSettings):
    """run_classifier.py's settings: the classifier's, and those of --multi_label."""

    multi_label: bool = setting(
        False,
        "Several labels per text (tsv/csv): --label_column holds them joined by "
        "--label_separator (an empty cell: none); a sigmoid per label, binary cross-entropy.",
    )
    label_separator: str = setting(",", "--multi_label: what joins a cell's labels.")
    threshold: float | None = setting(
        None,
        "--multi_label: a label is predicted when its probability is over this. Default: the "
        "thresholds of the checkpoint's run (its task.json) when the run does not train, else 0.5.",
    )
    tune_thresholds: bool = setting(
        False,
        "--multi_label with --do_eval: pick each label's threshold that maximizes its F1 on dev, "
        "record them in task.json; prediction and the export then use them.",
    )
    thresholds: list | None = derived(
        None, "Each label's threshold (--threshold, tuned, or the checkpoint's run's); None: 0.5."
    )

    def check(self):
        super().check()
        if not self.multi_label:
            for name in ("threshold", "tune_thresholds"):
                if getattr(self, name):
                    raise InputError(f"--{name} is for --multi_label=True")
            return
        if self.task_name not in ("tsv", "csv") or self.tfds_name:
            raise InputError("--multi_label reads your own tables: --task_name=tsv or csv")
        if self.threshold is not None and not 0 < self.threshold < 1:
            raise InputError(f"--threshold must be in (0, 1), got {self.threshold}")
        if self.tune_thresholds and not self.do_eval:
            raise InputError("--tune_thresholds picks the thresholds on dev: pass --do_eval")


@dataclasses.dataclass(kw_only=True)
class SquadSettings(TaskSettings, SquadWindowSettings, TfdsDataDirSetting):
    """run_squad.py's settings: the shared fine-tuning ones (max_seq_length 384), the windowing and
    n-best ones (SquadWindowSettings) and where the data comes from."""

    max_seq_length: int = restated(
        RunSettings,
        "max_seq_length",
        SQUAD_MAX_SEQ_LENGTH,
        help="Longest WordPiece sequence: question, window and 3 tokens.",
    )
    train_file: str | None = setting(None, "SQuAD json for training, e.g. train-v1.1.json.")
    predict_file: str | None = setting(
        None, "SQuAD json for predictions, e.g. dev-v1.1.json or dev-v2.0.json."
    )
    verbose_logging: bool = setting(
        False, "Log why an answer could not be mapped back onto its words."
    )
    tfds_name: str | None = setting(
        None, "Read TensorFlow Datasets squad/v1.1 or squad/v2.0 instead of files."
    )

    def check(self):
        """FineTuningSettings.check, SQuAD's windowing and n-best rules (`check_windows`, which the
        export checks too) and where the data comes from."""
        super().check()
        self.check_windows(self.max_seq_length)
        if self.tfds_name and (self.train_file or self.predict_file):
            raise InputError("pass --tfds_name or --train_file/--predict_file, not both")
        if self.do_train and not (self.train_file or self.tfds_name):
            raise InputError("--do_train needs --train_file (or --tfds_name)")
        if (self.do_predict or self.do_eval) and not (self.predict_file or self.tfds_name):
            raise InputError("--do_predict and --do_eval need --predict_file (or --tfds_name)")


@dataclasses.dataclass(kw_only=True)
class TaggerSettings(TaskSettings, DataDirSetting, DocStrideSetting):
    """run_ner.py's settings: the shared fine-tuning ones plus the data and the window stride."""

    data_dir: str | None = restated(
        DataDirSetting,
        "data_dir",
        help="Folder with train.txt, dev.txt (or valid.txt) and test.txt in CoNLL format (also the "
        "original release's eng.train, eng.testa, eng.testb).",
    )
    label_column: int = setting(
        -1,
        "Column holding the label (0-based; negative counts from the end, -1 = last). The word is "
        "column 0.",
    )
    doc_stride: int | None = restated(
        DocStrideSetting,
        "doc_stride",
        help="A sentence longer than max_seq_length - 2 wordpieces is split into overlapping windows "
        "starting this many pieces apart (default: (max_seq_length - 2) // 2).",
    )

    def check(self):
        super().check()
        self.check_data_dir()
        if self.max_seq_length < 3:
            raise InputError(f"--max_seq_length={self.max_seq_length}: must be at least 3")
        self.check_doc_stride()


@dataclasses.dataclass(kw_only=True)
class FeatureTaggerSettings(TaggerSettings):
    """run_ner.py's settings: the tagger's, plus the feature-based approach's."""

    feature_layers: str | None = setting(
        None,
        "The feature-based approach (BERT paper 5.3): freeze the encoder (from --init_checkpoint) "
        "and train a two-layer BiLSTM and a dense layer on these layers' outputs. The weighted "
        "sums learn one softmax-normalised weight per layer and a scale (ELMo's scalar mix); "
        "weighted_sum_all mixes every transformer layer, not the embeddings. Unset: fine-tune.",
        choices=FEATURE_LAYERS,
        recorded=True,
    )
    lstm_size: int = setting(
        DEFAULT_LSTM_SIZE,
        "--feature_layers: units of each direction of each of the two BiLSTM layers (the paper's "
        "768-dimensional BiLSTM; a layer's output is 2 x this).",
        recorded=True,
    )
    encoder_features_dir: str | None = setting(
        None,
        "--feature_layers: folder of the encoder's cached layers (default --output_dir). Runs "
        "sharing it with the same checkpoint, layers and data run the encoder once.",
    )

    def check(self):
        super().check()
        if self.lstm_size <= 0:
            raise InputError(f"--lstm_size must be positive, got {self.lstm_size}")
        if self.feature_layers is None:
            if self.lstm_size != DEFAULT_LSTM_SIZE:
                raise InputError("--lstm_size applies only with --feature_layers")
            if self.encoder_features_dir is not None:
                raise InputError("--encoder_features_dir applies only with --feature_layers")


@dataclasses.dataclass(kw_only=True)
class MultipleChoiceSettings(TaskSettings, DataDirSetting):
    """run_swag.py's settings: the shared fine-tuning ones plus the data folder."""

    data_dir: str | None = restated(
        DataDirSetting,
        "data_dir",
        help="Folder with SWAG's train.csv, val.csv and test.csv, or train.jsonl, dev.jsonl and "
        'test.jsonl of {"context", "choices", "label", "question" (optional)}.',
    )

    def check(self):
        super().check()
        self.check_data_dir()


@dataclasses.dataclass(kw_only=True)
class EmbeddingSettings(TaskSettings, DataDirSetting):
    """run_embedding.py's settings: the shared fine-tuning ones, the data folder and the pooling."""

    data_dir: str | None = restated(
        DataDirSetting,
        "data_dir",
        help="Folder with train.tsv and dev.tsv (rows anchor<TAB>positive[<TAB>hard negative]; or "
        'train.jsonl, dev.jsonl of {"anchor", "positive", "negative" (optional)}) and test.txt '
        '(one text to embed per line; or test.jsonl of {"text"}).',
    )
    # Recorded in task.json as the run settled them (EmbeddingTask.setup: the flag, else the
    # checkpoint's).
    pooling: str | None = setting(
        None,
        "How token vectors become the text's: mean, cls or max. Default: --init_checkpoint's "
        "(its run's task.json, or a converted model's embedding.json), else mean.",
        choices=POOLINGS,
        recorded=True,
        recorded_default="mean",
    )
    normalize: bool | None = setting(
        None,
        "L2-normalize the text vectors. Default: --init_checkpoint's (as --pooling), else true.",
        recorded=True,
        recorded_default=True,
    )
    similarity_scale: float = setting(
        DEFAULT_SCALE,
        "Training and eval_loss: the multiplier of the cosine similarities before the softmax "
        "over the in-batch candidates (sentence-transformers' default, 20).",
    )

    positive = (*TaskSettings.positive, "similarity_scale")

    def check(self):
        super().check()
        self.check_data_dir()


@dataclasses.dataclass(kw_only=True)
class DistillationSettings(MultiLabelSettings):
    """run_distillation.py's settings: run_classifier.py's, plus the teacher, the student and the loss.

    The student's encoder settings, vocabulary, casing and first weights come from the teacher's run
    (--teacher_dir): the run fills --bert_config_file and --init_checkpoint (tasks/distillation/run.py).
    A multi-label or regression teacher makes a student of its kind.
    """

    vocab_file: str | None = restated(
        VocabFileSetting,
        "vocab_file",
        help="vocab.txt of the student; default the teacher's (its vocab.txt).",
    )
    teacher_dir: str | None = setting(
        None, "The teacher: a run_classifier.py --output_dir (task.json, checkpoints, vocab.txt)."
    )
    student_layers: int | None = setting(
        None,
        "Encoder layers of the student, taken from the teacher's, spread evenly: the top layer of "
        "each of that many equal groups (2 of 12: layers 5 and 11).",
    )
    student_layer_map: str | None = setting(
        None, "Which teacher layers (0-based, comma-separated) the student starts from, e.g. 0,3."
    )
    student_config: str | None = setting(
        None,
        "bert_config.json of another BERT to start the student from (e.g. a small BERT of Turc "
        "et al., 2019) instead of the teacher's layers; its weights: --student_init_checkpoint.",
    )
    student_init_checkpoint: str | None = setting(
        None, "With --student_config: the student's first weights (its encoder; a new head)."
    )
    temperature: float = setting(
        2.0, "Softmax temperature of the teacher's and the student's probabilities (Hinton, 2015)."
    )
    hard_label_weight: float = setting(
        0.0,
        "Weight of the ordinary loss on the true labels beside the teacher's soft loss (weight "
        "1); transfer texts have no label and count 0.",
    )
    transfer_file: str | None = setting(
        None,
        "Unlabelled in-domain texts, one per line (text_a<TAB>text_b for a pair task), added to "
        "the training data with the teacher's probabilities as their only targets.",
    )

    positive = (*MultiLabelSettings.positive, "temperature")

    def check_distillation(self):
        """The distillation flags on their own, before the teacher is read.

        Raises:
          InputError: naming the flag.
        """
        if not self.teacher_dir:
            raise InputError("--teacher_dir is required (a run_classifier.py --output_dir)")
        for name in ("bert_config_file", "init_checkpoint"):
            if getattr(self, name):
                raise InputError(
                    f"--{name}: the student's encoder comes from --teacher_dir, or from "
                    "--student_config and --student_init_checkpoint"
                )
        if self.temperature <= 0:
            raise InputError(f"--temperature must be positive, got {self.temperature}")
        if self.hard_label_weight < 0:
            raise InputError(f"--hard_label_weight must be >= 0, got {self.hard_label_weight}")
        if self.student_init_checkpoint and not self.student_config:
            raise InputError("--student_init_checkpoint needs --student_config (its bert_config)")
        chosen = [
            f"--{name}"
            for name in ("student_layers", "student_layer_map", "student_config")
            if getattr(self, name) is not None
        ]
        if not chosen:
            raise InputError(
                "give the student: --student_layers, --student_layer_map or --student_config"
            )
        if self.student_config and len(chosen) > 1:
            raise InputError(f"{' and '.join(chosen)}: --student_config takes no teacher layers")
        if self.doc_stride is not None:
            raise InputError(
                "--doc_stride: distillation reads each text whole (cut to --max_seq_length)"
            )
        if self.class_weights not in (None, "", "none"):
            raise InputError("--class_weights: the distillation loss weighs no labels")


# {model_type: its settings class}: the registry of what task.json records of each task.
SETTINGS_CLASSES = {
    "classifier": ClassifierSettings,
    "multi_label": MultiLabelSettings,
    "squad": SquadSettings,
    "tagger": TaggerSettings,
    "feature_tagger": FeatureTaggerSettings,
    "multiple_choice": MultipleChoiceSettings,
    "embedding": EmbeddingSettings,
}
