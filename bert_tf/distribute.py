"""Choosing and creating the tf.distribute strategy from flags."""

import dataclasses
import json
import os

import tensorflow as tf
from absl import logging

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")


def resolve_strategy_name(distribution_strategy, use_tpu=False):
    """The strategy to build: `--use_tpu` (the original's flag) implies "tpu"; None: by the devices.

    Raises:
      ValueError: on an unknown name, or `--use_tpu` with another strategy.
    """
    if distribution_strategy is not None and distribution_strategy not in STRATEGIES:
        raise ValueError(
            f"--distribution_strategy must be one of {STRATEGIES}, got {distribution_strategy!r}"
        )
    if use_tpu:
        if distribution_strategy not in (None, "one_device", "tpu"):
            raise ValueError(
                f"--use_tpu conflicts with --distribution_strategy={distribution_strategy}"
            )
        return "tpu"
    return distribution_strategy


@dataclasses.dataclass(frozen=True)
class DeviceChoice:
    """What to build: "one_device" or "mirrored", over these device names."""

    strategy: str
    devices: tuple


def choose_devices(distribution_strategy, num_gpus, gpus, cpus=("/cpu:0",)):
    """The local devices a run uses, from the flags and the visible devices (no TensorFlow call).

    Without flags the devices decide, as TensorFlow placed the original's work: no GPU, the CPU; one
    GPU, that GPU; several, MirroredStrategy over all of them (--train_batch_size is the global batch).

    Args:
      distribution_strategy: None (by the devices), "one_device" or "mirrored".
      num_gpus: None (every visible GPU), 0 (the CPU) or N (the first N GPUs).
      gpus: the names of the visible GPUs, in order (e.g. ["/device:GPU:0", "/device:GPU:1"]).
      cpus: the names of the logical CPU devices ("mirrored" without GPUs mirrors over them all).

    Returns:
      A DeviceChoice.

    Raises:
      ValueError: naming --num_gpus, for a negative count, more GPUs than are visible, or several
        GPUs with one_device.
    """
    if num_gpus is not None and num_gpus < 0:
        raise ValueError(f"--num_gpus must be >= 0 (or unset: every visible GPU), got {num_gpus}")
    if num_gpus is not None and num_gpus > len(gpus):
        raise ValueError(f"--num_gpus={num_gpus} but only {len(gpus)} GPU(s) are visible")
    chosen = tuple(gpus if num_gpus is None else gpus[:num_gpus])
    if distribution_strategy == "mirrored":
        return DeviceChoice("mirrored", chosen or tuple(cpus))
    if distribution_strategy == "one_device":
        if num_gpus is not None and num_gpus > 1:
            raise ValueError(
                f"--num_gpus={num_gpus} needs --distribution_strategy=mirrored, not one_device"
            )
        return DeviceChoice("one_device", chosen[:1] or tuple(cpus[:1]))
    if distribution_strategy is not None:
        raise ValueError(
            f"choose_devices takes one_device or mirrored, not {distribution_strategy}"
        )
    if len(chosen) > 1:
        return DeviceChoice("mirrored", chosen)
    return DeviceChoice("one_device", chosen or tuple(cpus[:1]))


def get_strategy(
    distribution_strategy=None,
    num_gpus=None,
    tpu_name=None,
    tpu_zone=None,
    gcp_project=None,
    num_tpu_cores=None,
    collective_timeout_seconds=None,
):
    """Builds a tf.distribute.Strategy.

    Args:
      distribution_strategy: one of STRATEGIES, or None: by the visible devices (choose_devices).
      num_gpus: for None / one_device / mirrored: None every visible GPU, 0 the CPU, N the first N
        GPUs. "mirrored" without GPUs mirrors over every logical CPU device.
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
    if distribution_strategy in (None, "one_device", "mirrored"):
        choice = choose_devices(
            distribution_strategy,
            num_gpus,
            [d.name for d in tf.config.list_logical_devices("GPU")],
            [d.name for d in tf.config.list_logical_devices("CPU")],
        )
        if choice.strategy == "one_device":
            return tf.distribute.OneDeviceStrategy(choice.devices[0])
        return tf.distribute.MirroredStrategy(list(choice.devices))
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


def describe(strategy, batch_sizes):
    """One line naming the strategy, its devices and each global batch with its per-replica share.

    Args:
      strategy: a tf.distribute.Strategy.
      batch_sizes: {"train": 32, ...}: the global batches of the steps the run takes.
    """
    replicas = strategy.num_replicas_in_sync
    devices = ", ".join(_short_name(d) for d in strategy.extended.worker_devices)
    batches = "; ".join(
        f"{name} batch {size} global, {size // replicas} per replica"
        for name, size in batch_sizes.items()
    )
    return f"{type(strategy).__name__} over {replicas} replica(s) on {devices}: {batches}"


def _short_name(device):
    """ "/job:localhost/replica:0/task:0/device:GPU:1" -> "GPU:1" (a multi-worker name stays whole)."""
    return device.split("device:")[-1] if device.startswith("/job:localhost/") else device


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


def input_context(strategy):
    """The tf.distribute.InputContext of this worker's input pipeline, as the strategy's own
    distribute_datasets_from_function makes it: one pipeline per worker, feeding its replicas."""
    # Under multi_worker_mirrored, the worker's place among the cluster's workers (the chief first).
    worker = getattr(strategy.extended, "_id_in_cluster", 0)
    num_workers = getattr(strategy.extended, "_num_workers", 1)
    return tf.distribute.InputContext(num_workers, worker, strategy.num_replicas_in_sync)
