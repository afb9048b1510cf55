"""What every benchmark prints about its machine, and the thread settings all runners of a table share.

A ratio is only worth something when both sides ran on the same machine in the same process, under
the same load: `header()` names the CPU and the flags that decide the kernels TensorFlow and torch
pick (AVX2, AVX-512, bfloat16 dot products, AMX), the GPUs, and the load average; `load_line()` is
printed again after the measurement so a reader sees whether other work overlapped it.
"""

import json
import os
import platform

from bench import timing

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


def header(with_tensorflow=True):
    """Lines naming the machine, for the top of a benchmark's output.

    with_tensorflow=False leaves out the GPU and TensorFlow line, for a bench whose parent process
    only times child processes (importing TensorFlow there would cost ~3 s and ~500 MB for nothing).
    """
    flags = cpu_flags()
    present = ", ".join(f"{flag} {'yes' if flag in flags else 'no'}" for flag in CPU_FLAGS)
    lines = [f"CPU: {cpu_model()}, {os.cpu_count()} logical cores; {present}"]
    if with_tensorflow:
        import tensorflow as tf

        lines.append(
            f"GPU: {', '.join(gpus()) or 'none'}; TensorFlow {tf.__version__}, "
            f"Python {platform.python_version()}"
        )
    else:
        lines.append(f"Python {platform.python_version()}")
    lines.append(load_line())
    return "\n".join(lines)


def set_threads(num_threads):
    """The same thread pools for TensorFlow and torch: num_threads intra-op and num_threads inter-op.

    Intra-op threads split one op (a matmul); inter-op threads run independent ops at once. Both are
    pinned, to the same number for every runner of a table (0 = one per core), so that no runner gets
    a larger pool by its framework's default. Must run before TensorFlow executes its first op and
    before torch runs any parallel work; torch is only configured when it is installed. The
    scripts this process starts (bench/scripts.py) take the same pools, by TensorFlow's variables.

    Returns:
      The number of threads of each pool.
    """
    import tensorflow as tf

    num_threads = num_threads or os.cpu_count()
    os.environ["TF_NUM_INTRAOP_THREADS"] = os.environ["TF_NUM_INTEROP_THREADS"] = str(num_threads)
    tf.config.threading.set_intra_op_parallelism_threads(num_threads)
    tf.config.threading.set_inter_op_parallelism_threads(num_threads)
    try:
        import torch
    except ImportError:
        return num_threads
    torch.set_num_threads(num_threads)
    torch.set_num_interop_threads(num_threads)
    return num_threads


def threads_line(num_threads):
    """What set_threads pinned, in the words every bench prints."""
    return f"{num_threads} intra-op and {num_threads} inter-op threads per runner (TensorFlow and torch)"


class Runs:
    """runs.jsonl: each finished run one JSON line, reused when the same run is asked again."""

    def __init__(self, path):
        self.path = path
        self.rows = []
        if os.path.exists(path):
            with open(path, encoding="utf-8") as reader:
                self.rows = [json.loads(line) for line in reader if line.strip()]

    def get(self, key, run, *args):
        """The row of `key` (a dict), from the file or made by run(*args) and appended."""
        for row in self.rows:
            if all(row.get(k) == v for k, v in key.items()):
                return row
        row = {**key, **run(*args), "load": load_line()}
        print(json.dumps({k: v for k, v in row.items() if not isinstance(v, list)}), flush=True)
        with open(self.path, "a", encoding="utf-8") as writer:
            writer.write(json.dumps(row) + "\n")
        self.rows.append(row)
        return row


def matmul_rates(dtypes=("float32", "bfloat16"), size=2048, repeats=10):
    """{dtype: GFLOP/s of a size x size tf.matmul (2 size^3 flops) in it}: the machine's own limit.

    The dtypes take turns repeat after repeat, as the runners of a table do; the median repeat counts.
    """
    import numpy as np
    import tensorflow as tf

    pair = np.random.default_rng(0).standard_normal([2, size, size]).astype(np.float32)
    calls = {}
    for dtype in dtypes:
        a, b = tf.constant(pair[0], dtype), tf.constant(pair[1], dtype)
        matmul = tf.function(lambda a=a, b=b: tf.matmul(a, b))
        matmul()  # tracing
        calls[dtype] = lambda matmul=matmul: matmul().numpy()
    seconds = timing.timed_in_turns(calls, repeats)
    return {dtype: 2 * size**3 / float(np.median(s)) / 1e9 for dtype, s in seconds.items()}


def encoder_flops(config, seq_length):
    """Matmul FLOPs (multiply + add = 2) of one example of seq_length tokens through a BERT encoder.

    Per layer: the q, k, v and output projections 2S(4H^2), the feed-forward 2S(2HI), the attention's
    scores and weighted sum 4S^2H; then the pooler 2H^2. Element-wise work (GELU, LayerNorm, softmax)
    is left out: what a runner reaches against the matmul rate is then its share of the physical limit.
    """
    hidden, intermediate = config.hidden_size, config.intermediate_size
    dense = 2 * seq_length * (4 * hidden * hidden + 2 * hidden * intermediate)
    attention = 4 * seq_length * seq_length * hidden
    return config.num_hidden_layers * (dense + attention) + 2 * hidden * hidden
