"""Strategy selection from flags and devices; the TPU path fails fast with a message naming the flags."""

import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from bert_tf.distribute import (
    DeviceChoice,
    choose_devices,
    get_strategy,
    is_chief,
    resolve_strategy_name,
)

from conftest import REPO_DIR, SAMPLE_DIR, SUBPROCESS_ENV

GPUS = [f"/device:GPU:{i}" for i in range(4)]
CPUS = ["/device:CPU:0", "/device:CPU:1"]


def test_use_tpu_implies_the_tpu_strategy():
    assert resolve_strategy_name("one_device", use_tpu=True) == "tpu"
    assert resolve_strategy_name("mirrored") == "mirrored"


def test_use_tpu_with_another_strategy_is_rejected():
    with pytest.raises(ValueError, match="--use_tpu"):
        resolve_strategy_name("multi_worker_mirrored", use_tpu=True)


def test_unknown_strategy_names_the_flag():
    with pytest.raises(ValueError, match="--distribution_strategy"):
        resolve_strategy_name("parameter_server")


def test_one_device_runs_on_the_cpu_and_is_chief():
    strategy = get_strategy("one_device")
    assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
    assert strategy.num_replicas_in_sync == 1
    assert is_chief(strategy)


def test_more_gpus_than_visible_is_rejected():
    with pytest.raises(ValueError, match="--num_gpus=4"):
        get_strategy("mirrored", num_gpus=4)


def test_tpu_without_a_name_asks_for_the_flag():
    with pytest.raises(ValueError, match="--tpu_name"):
        get_strategy("tpu")


def test_unreachable_tpu_fails_with_a_clear_message():
    # "local" fails at once on a machine without a TPU (a grpc:// address would hang: never use one here).
    with pytest.raises(ValueError, match="no TPU reachable for --tpu_name='local'"):
        get_strategy("tpu", tpu_name="local")


@pytest.mark.parametrize(
    "visible, num_gpus, expected",
    [
        (0, None, DeviceChoice("one_device", ("/device:CPU:0",))),
        (1, None, DeviceChoice("one_device", ("/device:GPU:0",))),
        (4, None, DeviceChoice("mirrored", tuple(GPUS))),
        (4, 0, DeviceChoice("one_device", ("/device:CPU:0",))),
        (4, 1, DeviceChoice("one_device", ("/device:GPU:0",))),
        (4, 2, DeviceChoice("mirrored", ("/device:GPU:0", "/device:GPU:1"))),
        (1, 0, DeviceChoice("one_device", ("/device:CPU:0",))),
    ],
)
def test_without_a_strategy_flag_the_visible_gpus_decide(visible, num_gpus, expected):
    assert choose_devices(None, num_gpus, GPUS[:visible], CPUS) == expected


@pytest.mark.parametrize(
    "strategy, visible, num_gpus, expected",
    [
        ("one_device", 4, None, DeviceChoice("one_device", ("/device:GPU:0",))),
        ("one_device", 0, None, DeviceChoice("one_device", ("/device:CPU:0",))),
        ("one_device", 4, 0, DeviceChoice("one_device", ("/device:CPU:0",))),
        ("mirrored", 4, None, DeviceChoice("mirrored", tuple(GPUS))),
        ("mirrored", 4, 3, DeviceChoice("mirrored", tuple(GPUS[:3]))),
        ("mirrored", 0, None, DeviceChoice("mirrored", tuple(CPUS))),
        ("mirrored", 4, 0, DeviceChoice("mirrored", tuple(CPUS))),
    ],
)
def test_a_named_strategy_takes_the_devices_it_names(strategy, visible, num_gpus, expected):
    assert choose_devices(strategy, num_gpus, GPUS[:visible], CPUS) == expected


@pytest.mark.parametrize(
    "strategy, visible, num_gpus, message",
    [
        (None, 1, 4, r"^--num_gpus=4 but only 1 GPU\(s\) are visible$"),
        (None, 0, 1, r"^--num_gpus=1 but only 0 GPU\(s\) are visible$"),
        ("mirrored", 2, 3, r"^--num_gpus=3 but only 2 GPU\(s\) are visible$"),
        ("one_device", 4, 2, r"^--num_gpus=2 needs --distribution_strategy=mirrored"),
        (None, 4, -2, r"^--num_gpus must be >= 0"),
    ],
)
def test_impossible_gpu_counts_are_one_line_naming_the_flag(strategy, visible, num_gpus, message):
    with pytest.raises(ValueError, match=message) as error:
        choose_devices(strategy, num_gpus, GPUS[:visible], CPUS)
    assert "\n" not in str(error.value)


def test_the_default_on_a_machine_without_gpus_is_the_cpu():
    assert not tf.config.list_logical_devices("GPU")  # this machine: see ENVIRONMENT.md
    strategy = get_strategy()
    assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
    assert strategy.extended.worker_devices[0].endswith("device:CPU:0")


_LOGGED_RUN = textwrap.dedent(
    """
    import sys
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    sys.argv = ["run_pretraining.py", *sys.argv[1:]]
    sys.path.insert(0, ".")
    import run_pretraining
    run_pretraining.cli_main()
    """
)


@pytest.mark.parametrize(
    "flags, expected",
    [
        ([], "OneDeviceStrategy over 1 replica(s) on CPU:0: train batch 4 global, 4 per replica"),
        pytest.param(
            ["--distribution_strategy=mirrored", "--do_eval", "--eval_batch_size=6"],
            "MirroredStrategy over 2 replica(s) on CPU:0, CPU:1: train batch 4 global, 2 per "
            "replica; eval batch 6 global, 3 per replica",
            marks=pytest.mark.slow,
        ),
    ],
    ids=["default", "mirrored over two CPU devices"],
)
def test_a_training_script_logs_its_devices_and_batches_in_one_line(tmp_path, flags, expected):
    from bert_tf.data.pretraining import encoding, instances

    instance = instances.TrainingInstance(
        [101, 7592, 102, 2088, 102], [0, 0, 0, 1, 1], [1], [7592], False
    )
    records = encoding.ExampleEncoder(8, 2, max_id=30522).encode(instance)
    (tmp_path / "data.tfrecord").write_bytes(b"".join(encoding.frame_records([records] * 8)))
    args = [
        f"--input_file={tmp_path / 'data.tfrecord'}", f"--output_dir={tmp_path / 'out'}",
        f"--bert_config_file={SAMPLE_DIR / 'bert_config_tiny.json'}", "--max_seq_length=8",
        "--max_predictions_per_seq=2", "--do_train", "--train_batch_size=4",
        "--num_train_steps=1", "--max_eval_steps=1", *flags,
    ]  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-c", _LOGGED_RUN, *args], cwd=REPO_DIR, env=SUBPROCESS_ENV,
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if "Devices: " in line]
    assert len(lines) == 1, result.stderr[-3000:]
    assert lines[0].endswith(f"Devices: {expected}"), lines[0]
