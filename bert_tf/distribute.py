"""Choosing and creating the tf.distribute strategy from flags."""

import json
import os

import tensorflow as tf
from absl import logging

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")


def resolve_strategy_name(distribution_strategy, use_tpu=False):
    """The strategy to build: `--use_tpu` (the original's flag) implies "tpu".

    Raises:
      ValueError: on an unknown name, or `--use_tpu` with another strategy.
    """
    if distribution_strategy not in STRATEGIES:
        raise ValueError(
            f"--distribution_strategy must be one of {STRATEGIES}, got {distribution_strategy!r}"
        )
    if use_tpu:
        if distribution_strategy not in ("one_device", "tpu"):
            raise ValueError(
                f"--use_tpu conflicts with --distribution_strategy={distribution_strategy}"
            )
        return "tpu"
    return distribution_strategy


def get_strategy(
    distribution_strategy="one_device",
    num_gpus=0,
    tpu_name=None,
    tpu_zone=None,
    gcp_project=None,
    num_tpu_cores=None,
    collective_timeout_seconds=None,
):
    """Builds a tf.distribute.Strategy.

    Args:
      distribution_strategy: one of STRATEGIES.
      num_gpus: GPUs to use; 0 runs on CPU. "mirrored" with 0 GPUs mirrors over every logical CPU device.
      tpu_name: TPU name or grpc:// address for TPUClusterResolver ("local" for a TPU VM).
      tpu_zone, gcp_project: where to look the TPU up (optional; metadata server otherwise).
      num_tpu_cores: if given, must equal the number of TPU cores found.
      collective_timeout_seconds: multi_worker_mirrored: a collective that waits longer (a dead or
        hung peer) fails with DeadlineExceededError instead of waiting forever; None or 0: no limit.

    Returns:
      The strategy.

    Raises:
      ValueError: when the devices the flags ask for do not exist, or no TPU is reachable.
    """
    if num_gpus < 0:
        raise ValueError(f"--num_gpus must be >= 0, got {num_gpus}")
    if distribution_strategy in ("one_device", "mirrored"):
        _check_gpus(num_gpus)
    if distribution_strategy == "one_device":
        if num_gpus > 1:
            raise ValueError(
                f"--num_gpus={num_gpus} needs --distribution_strategy=mirrored, not one_device"
            )
        return tf.distribute.OneDeviceStrategy("/gpu:0" if num_gpus else "/cpu:0")
    if distribution_strategy == "mirrored":
        if num_gpus:
            devices = [f"/gpu:{i}" for i in range(num_gpus)]
        else:
            devices = [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices)
    if distribution_strategy == "multi_worker_mirrored":
        if "TF_CONFIG" not in os.environ:
            logging.warning("multi_worker_mirrored without TF_CONFIG: running as a single worker")
        options = tf.distribute.experimental.CommunicationOptions(
            timeout_seconds=collective_timeout_seconds or None
        )
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    if distribution_strategy == "tpu":
        return _tpu_strategy(tpu_name, tpu_zone, gcp_project, num_tpu_cores)
    raise ValueError(
        f"--distribution_strategy must be one of {STRATEGIES}, got {distribution_strategy!r}"
    )


def _check_gpus(num_gpus):
    found = len(tf.config.list_physical_devices("GPU"))
    if num_gpus > found:
        raise ValueError(f"--num_gpus={num_gpus} but only {found} GPU(s) are visible")


def _tpu_strategy(tpu_name, tpu_zone, gcp_project, num_tpu_cores):
    if not tpu_name:
        raise ValueError("--tpu_name (or --master) is required with --use_tpu / tpu strategy")
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
            tpu=tpu_name, zone=tpu_zone, project=gcp_project
        )
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, OSError, tf.errors.OpError, RuntimeError) as error:  # OSError: URLError
        raise ValueError(
            f"no TPU reachable for --tpu_name={tpu_name!r} (--tpu_zone={tpu_zone!r}, "
            f"--gcp_project={gcp_project!r}): {error}"
        ) from error
    strategy = tf.distribute.TPUStrategy(resolver)
    if num_tpu_cores and strategy.num_replicas_in_sync != num_tpu_cores:
        raise ValueError(
            f"--num_tpu_cores={num_tpu_cores} but the TPU has {strategy.num_replicas_in_sync} cores"
        )
    return strategy


def is_chief(strategy):
    """Whether this process writes checkpoints, summaries and exports (always, except non-chief workers)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or resolver is None:
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type is None or task_type == "chief":
        return True
    cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
    return task_type == "worker" and task_id == 0 and "chief" not in cluster
