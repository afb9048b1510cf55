"""bert_tf.distil: the Keras way to a shallower student of a fine-tuned classifier, and a
saved student loading after `import keras, bert_tf` alone.

References: the teacher's own weights (the student starts from its chosen layers), the teacher's
logits (what the student learns), and a fresh process that imports only keras and bert_tf.
"""

import json
import subprocess
import sys

import keras
import numpy as np
import pytest

import bert_tf
from bert_tf import BertPreprocessor, BertTextClassifier
from bert_tf.checkpoints import google_variable_names
from bert_tf.models.distillation import DistilledTextClassifier

from conftest import REPO_DIR, SAMPLE_DIR, SUBPROCESS_ENV

VOCAB = str(SAMPLE_DIR / "vocab.txt")
WORDS = ["happy", "sad", "glad", "gloomy", "merry", "dull", "bright", "grim"]
TEXTS = [f"the lady was {a} and {b}" for a in WORDS for b in WORDS[:4]]


@pytest.fixture(scope="module")
def teacher():
    """A tiny 2-layer classifier fitted on positive and negative words: the teacher."""
    keras.utils.set_random_seed(4)
    config = json.loads((SAMPLE_DIR / "bert_config_tiny.json").read_text())
    model = BertTextClassifier(
        BertPreprocessor(VOCAB, max_seq_length=16), config, num_classes=2, labels=["neg", "pos"]
    )
    model.compile(learning_rate=1e-3)
    labels = ["pos" if text.split()[3] in ("happy", "glad", "merry", "bright") else "neg"
              for text in TEXTS]  # fmt: skip
    model.fit(TEXTS, labels, batch_size=8, epochs=2, verbose=0)
    # A confident teacher: its head scaled up, so that its probabilities are far from uniform.
    head = google_variable_names(model.task_model)["output_weights"]
    head.assign(head * 5.0)
    return model


def test_distil_gives_a_student_of_the_teacher_s_chosen_layers_that_learns_its_logits(teacher):
    student = bert_tf.distil(teacher, student_layers=1, temperature=2.0)
    assert isinstance(student, DistilledTextClassifier) and student.teacher is teacher
    assert student.task_model.config.num_hidden_layers == 1 and student.labels == ["neg", "pos"]
    ours, theirs = (
        google_variable_names(student.task_model),
        google_variable_names(teacher.task_model),
    )
    # One layer of two, spread evenly: the teacher's top layer (1).
    for name in ("attention/self/query/kernel", "output/dense/kernel"):
        np.testing.assert_array_equal(
            ours[f"bert/encoder/layer_0/{name}"].numpy(),
            theirs[f"bert/encoder/layer_1/{name}"].numpy(),
        )
    np.testing.assert_array_equal(ours["output_weights"].numpy(), theirs["output_weights"].numpy())
    # The student's head zeroed (uniform probabilities): what it learns back is the teacher's.
    ours["output_weights"].assign(np.zeros_like(ours["output_weights"]))
    targets = student.distillation_targets(TEXTS)
    np.testing.assert_array_equal(targets[:, :2], teacher.predict(TEXTS, verbose=0))
    lowest = float(student.loss(targets, targets[:, :2]))  # the loss at the teacher's own logits

    def excess():
        return float(student.loss(targets, student.predict(TEXTS, verbose=0))) - lowest

    before = excess()
    student.compile(learning_rate=5e-3)
    student.fit(x=TEXTS, batch_size=8, epochs=8, verbose=0)  # no labels: the teacher's logits
    assert excess() < 0.5 * before
    evaluated = student.evaluate(TEXTS, ["neg"] * len(TEXTS), return_dict=True)
    assert set(evaluated) == {"loss", "accuracy"}


@pytest.mark.parametrize(
    "given, message",
    [
        ({"student_layers": 1.5}, r"^student_layers must be a positive integer, got 1.5$"),
        ({"student_layers": 3}, r"^student_layers=3: the teacher has 2 layers"),
        ({"layer_map": [0, 0.5]}, r"^layer_map\[1\] must be an integer of at least 0, got 0.5$"),
        ({"student_layers": 1, "temperature": 0}, r"^temperature must be a number above 0, got 0$"),
        ({"student_layers": 1, "hard_label_weight": "1"}, r"^hard_label_weight must be a number"),
    ],
)
def test_distil_s_arguments_are_one_line_naming_them(teacher, given, message):
    with pytest.raises(ValueError, match=message):
        bert_tf.distil(teacher, **given)
    with pytest.raises(ValueError, match=r"^teacher must be a BertTextClassifier, got str$"):
        bert_tf.distil("teacher_run_dir", student_layers=1)


def test_a_saved_student_loads_after_import_keras_and_bert_tf_alone(teacher, tmp_path):
    student = bert_tf.distil(teacher, student_layers=1)
    path = tmp_path / "student.keras"
    student.save(path)
    script = (
        "import json, sys\nimport keras, bert_tf\n"
        "model = keras.saving.load_model(sys.argv[1])\n"
        "print(json.dumps([type(model).__name__, model.predict(json.loads(sys.argv[2]), verbose=0).tolist()]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(path), json.dumps(TEXTS[:3])],
        capture_output=True, text=True, env=SUBPROCESS_ENV, cwd=REPO_DIR, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    name, logits = json.loads(result.stdout.strip().splitlines()[-1])
    assert name == "DistilledTextClassifier"
    np.testing.assert_allclose(logits, student.predict(TEXTS[:3], verbose=0), rtol=0, atol=1e-5)


def test_the_student_class_checks_its_own_arguments(teacher):
    config = teacher.task_model.config
    with pytest.raises(ValueError, match=r"^temperature must be a number above 0, got 'hot'$"):
        DistilledTextClassifier(teacher.preprocessor, config, num_classes=2, temperature="hot")
    with pytest.raises(ValueError, match=r"^hard_label_weight must be a number of at least 0"):
        DistilledTextClassifier(teacher.preprocessor, config, num_classes=2, hard_label_weight=-1)
    with pytest.raises(ValueError, match=r"^teacher must be a BertTextClassifier, got dict$"):
        DistilledTextClassifier(teacher.preprocessor, config, num_classes=2, teacher={})
