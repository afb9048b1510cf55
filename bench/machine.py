"""What every benchmark prints about its machine, and the thread settings all runners of a table share.

A ratio is only worth something when both sides ran on the same machine in the same process, under
the same load: `header()` names the CPU and the flags that decide the kernels TensorFlow and torch
pick (AVX2, AVX-512, bfloat16 dot products, AMX), the GPUs, and the load average; `load_line()` is
printed again after the measurement so a reader sees whether other work overlapped it.
"""

import os
import platform

# The CPU features that change which matmul kernels run, in /proc/cpuinfo's spelling.
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def cpu_model():
    """The CPU's model name from /proc/cpuinfo (platform's guess elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags():
    """The set of flags of the first CPU in /proc/cpuinfo (empty where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def gpus():
    import tensorflow as tf

    return [device.name for device in tf.config.list_physical_devices("GPU")]


def bfloat16_support():
    """(True, where) when bfloat16 matmuls run natively here (a GPU, AVX512_BF16 or AMX), else (False, why)."""
    if gpus():
        return True, "GPU"
    flags = cpu_flags()
    native = [flag for flag in ("avx512_bf16", "amx_bf16") if flag in flags]
    if native:
        return True, "CPU with " + " and ".join(native)
    return False, (
        "this CPU has neither AVX512_BF16 nor AMX (and there is no GPU): bfloat16 would be emulated, "
        "so a bfloat16 time here measures the emulation, not the format"
    )


def skips_precision(policy):
    """True (after printing why) when `policy` is a bfloat16 one and bfloat16 would be emulated here."""
    if policy == "float32":
        return False
    supported, why = bfloat16_support()
    if not supported:
        print(f"{policy}: skipped, {why}.")
    return not supported


def load_line():
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min)"


def header():
    """Lines naming the machine, for the top of a benchmark's output."""
    import tensorflow as tf

    flags = cpu_flags()
    present = ", ".join(f"{flag} {'yes' if flag in flags else 'no'}" for flag in CPU_FLAGS)
    return "\n".join(
        [
            f"CPU: {cpu_model()}, {os.cpu_count()} logical cores; {present}",
            f"GPU: {', '.join(gpus()) or 'none'}; TensorFlow {tf.__version__}, Python {platform.python_version()}",
            load_line(),
        ]
    )


def set_threads(num_threads):
    """The same number of compute threads for TensorFlow's ops and torch's (0 = one per core).

    Must run before TensorFlow executes its first op; torch is only configured when it is installed.
    """
    import tensorflow as tf

    num_threads = num_threads or os.cpu_count()
    tf.config.threading.set_intra_op_parallelism_threads(num_threads)
    try:
        import torch
    except ImportError:
        return num_threads
    torch.set_num_threads(num_threads)
    return num_threads
