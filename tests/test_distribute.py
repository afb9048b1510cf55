"""Strategy selection from flags; the TPU path fails fast with a message naming the flags."""

import pytest
import tensorflow as tf

from bert_tf.distribute import get_strategy, is_chief, resolve_strategy_name


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
