"""The Keras models stand alone: what `from bert_tf import ...` loads, and `import bert_tf` registering them.

Each check runs in a fresh interpreter: the modules an import loads are those of that process only.
"""

import json
import subprocess
import sys

import keras
import numpy as np

from bert_tf import BertPreprocessor, BertTextClassifier

from conftest import REPO_DIR, SAMPLE_DIR, SUBPROCESS_ENV

VOCAB = str(SAMPLE_DIR / "vocab.txt")
PUBLIC = (
    "BertTextClassifier",
    "BertTokenClassifier",
    "BertQuestionAnswerer",
    "BertMultipleChoice",
    "BertTextEmbedder",
    "BertMaskedLM",
    "BertPreprocessor",
)
# What the scripts' runs need and the Keras models must not load.
NOT_LOADED = ("bert_tf.tasks", "bert_tf.training", "bert_tf.settings", "bert_tf.shared_settings")

_LOADED = """
import json, sys
{imports}
print(json.dumps(sorted(sys.modules)))
"""


def _loaded(imports):
    result = subprocess.run(
        [sys.executable, "-c", _LOADED.format(imports=imports)],
        capture_output=True, text=True, env=SUBPROCESS_ENV, cwd=REPO_DIR, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def test_the_keras_models_load_no_run_no_settings_no_training():
    loaded = _loaded(f"from bert_tf import {', '.join(PUBLIC)}")
    ours = sorted(name for name in loaded if name.startswith("bert_tf."))
    assert "bert_tf.models.text_classifier" in ours  # the import did load the models
    assert [name for name in ours if name.startswith(NOT_LOADED)] == []
    # absl's flags only as TensorFlow and Keras load them (they do, through absl.logging).
    if "absl.flags" in loaded:
        assert "absl.flags" in _loaded("import tensorflow, keras")


def test_import_bert_tf_registers_every_class_load_model_needs(tmp_path):
    keras.utils.set_random_seed(3)
    config = json.loads((SAMPLE_DIR / "bert_config_tiny.json").read_text())
    model = BertTextClassifier(BertPreprocessor(VOCAB, max_seq_length=16), config, num_classes=3)
    texts = ["the lady was happy", "it rained all day"]
    expected = model.predict(texts, verbose=0)
    path = tmp_path / "classifier.keras"
    model.save(path)
    script = (
        "import json, sys\nimport keras, bert_tf\n"
        "model = keras.saving.load_model(sys.argv[1])\n"
        "print(json.dumps(model.predict(json.loads(sys.argv[2]), verbose=0).tolist()))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(path), json.dumps(texts)],
        capture_output=True, text=True, env=SUBPROCESS_ENV, cwd=REPO_DIR, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = np.array(json.loads(result.stdout.strip().splitlines()[-1]))
    np.testing.assert_allclose(loaded, expected, rtol=1e-5, atol=1e-5)


def test_saved_files_name_the_public_classes_by_their_registered_names():
    # A .keras file names a class "bert_tf>ClassName": the public names are what saved files hold.
    import bert_tf

    for name in PUBLIC:
        cls = getattr(bert_tf, name)
        assert keras.saving.get_registered_name(cls) == f"bert_tf>{name}"
        assert keras.saving.get_registered_object(f"bert_tf>{name}") is cls
