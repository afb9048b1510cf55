"""One request at a time: our exports as a server runs them, against transformers and keras-hub.

An encoder of `--model`'s shape (random weights, seed 0) is saved as a Google checkpoint and exported
by `export_saved_model.py --model_type=encoder` (with --freeze_weights when asked), again with
--mixed_precision=mixed_bfloat16 where the CPU multiplies bfloat16, and with --litert=float32 and
int8 when ai-edge-litert is installed. Each runner (latency_runners.py: our exports' serving_default
and serve_ids, the float32 export with TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1, the LiteRT files,
transformers on torch in float32, bfloat16 autocast and dynamic int8, keras-hub) lives in a process
of its own with `--threads` threads, and is called with the same raw strings of exactly N wordpieces
(batch x N of `--shapes`).

Two protocols (--protocols): back to back (--calls calls in a row after 5 untimed, --rounds rounds,
runner after runner) and taking turns call by call. Each runner times its own call. The limit line:
max(matmul FLOPs / the measured matmul rate, weight bytes / the measured read bandwidth).

    .venv/bin/python -m bench.bench_latency --shapes=1x32    # BERT-base, 3 rounds x 100 calls
    .venv/bin/python -m bench.bench_latency --model=bert_tiny --calls=5 --runners=bert_tf   # smoke
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from absl import app, flags

from bench import REPO_DIR, SHARED_DIR, latency_runners, machine, scripts, timing

FLAGS = flags.FLAGS
flags.DEFINE_bool(
    "freeze_weights", False, "Our exports with export_saved_model.py --freeze_weights (constants)."
)
flags.DEFINE_string("model", "bert_base", "A bert_tf.modeling.PRESETS name.")
flags.DEFINE_list(
    "shapes", ["1x8", "1x32", "1x128", "4x32"], "batch x wordpieces ([CLS], [SEP] included)."
)
flags.DEFINE_list(
    "runners",
    list(latency_runners.RUNNERS),
    "Processes to run (bert_tf_bf16 and transformers_bf16 only on CPUs with a bfloat16 matmul; "
    "litert_* need ai-edge-litert).",
)
flags.DEFINE_list(
    "protocols", ["back_to_back", "turns"], "back_to_back: each runner makes --rounds x --calls "
    "calls in a row, runners one after another, round by round; turns: the runners take turns "
    "call by call (--calls calls per shape).",
)  # fmt: skip
flags.DEFINE_integer("calls", 100, "Timed calls per shape and runner (per round back to back).")
flags.DEFINE_integer("rounds", 3, "Back-to-back rounds per shape and runner.")
flags.DEFINE_integer("threads", 2, "Intra-op and inter-op threads of every runner.")
flags.DEFINE_integer("max_seq_length", 128, "The export's max_seq_length.")
flags.DEFINE_string(
    "input_file",
    os.path.join(SHARED_DIR, "data", "austen_sentences.txt"),
    "Words to make texts of.",
)
flags.DEFINE_string("vocab_file", os.path.join(REPO_DIR, "sample_data", "vocab.txt"), "Vocabulary.")
flags.DEFINE_string("worker", None, "Internal: run as this runner's worker process.")
flags.DEFINE_string("work_dir", None, "Internal: the worker's inputs and export.")

WARMUP_CALLS = 5


def _rows(runner):
    """(text row, ids row or None) of a runner."""
    return latency_runners.RUNNERS[runner][1:]


def parse_shapes(shapes):
    """[(batch, wordpieces)] from "BxN" strings; a malformed one is a ValueError naming the flag."""
    parsed = []
    for shape in shapes:
        batch, _, length = shape.partition("x")
        if not (batch.isdigit() and length.isdigit() and int(batch) > 0 and int(length) > 2):
            raise ValueError(f"--shapes: {shape!r} is not batch x wordpieces, e.g. 1x32")
        parsed.append((int(batch), int(length)))
    return parsed


def texts_of_length(words, tokenizer, length, count, start=0):
    """`count` texts of exactly `length` - 2 wordpieces each, from consecutive words of `words`.

    A word that would overshoot is replaced by "the" (one wordpiece), so every text is exact.
    """
    texts, position = [], start
    for _ in range(count):
        chosen, pieces = [], 0
        while pieces < length - 2:
            word = words[position % len(words)]
            position += 1
            size = len(tokenizer.tokenize(word))
            if pieces + size > length - 2:
                word, size = "the", 1
            chosen.append(word)
            pieces += size
        texts.append(" ".join(chosen))
    return texts


def _inputs(shapes, calls):
    """{shape index: [batch of texts] * (WARMUP_CALLS + calls)}, different texts every call."""
    from bert_tf.tokenization import FullTokenizer

    tokenizer = FullTokenizer(FLAGS.vocab_file, do_lower_case=True)
    with open(FLAGS.input_file, encoding="utf-8") as reader:
        words = reader.read().split()
    inputs = {}
    for index, (batch, length) in enumerate(shapes):
        texts = texts_of_length(words, tokenizer, length, batch * (WARMUP_CALLS + calls), 7 * index)
        inputs[index] = [texts[i : i + batch] for i in range(0, len(texts), batch)]
    return inputs


def _export(work_dir, **flags):
    """export_saved_model.py --model_type=encoder of the encoder _setup saved, with `flags`."""
    checkpoint = os.path.join(work_dir, "encoder", "bert_model.ckpt")
    config_file = os.path.join(work_dir, "encoder", "bert_config.json")
    export_dir = os.path.join(work_dir, "_".join(["export", *flags.values()]))
    return scripts.export_encoder(checkpoint, config_file, FLAGS.vocab_file, export_dir, **flags)


def distinct_weights(model, seed=0):
    """Gives every weight values of its own, as a trained model's are: N(0, 0.02), LayerNorm's
    gammas 1 + N(0, 0.02). Keras' initial weights are not: query, key and value share one
    initializer and start equal, biases at 0 and gammas at 1, which Grappler folds away in a frozen
    graph (the equal projections computed once), flattering its time."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        values = 0.02 * rng.standard_normal(variable.shape)
        variable.assign((values + variable.path.endswith("gamma")).astype(variable.dtype))


def _timed(call, argument):
    """(wall seconds, call(argument)): the worker's answer for one call."""
    wall, _, length = timing.timed(call, argument)
    return wall, length


def worker_main(runner, work_dir):
    """Builds `runner`, says "ready", then answers each line: "turn shape call" with the JSON
    [text seconds, text length, ids seconds or null, ids length or null]; "burst shape count" with
    [[seconds of each of `count` text calls made in a row], their lengths] (after 5 untimed)."""
    with open(os.path.join(work_dir, "setup.json"), encoding="utf-8") as reader:
        setup = json.load(reader)
    inputs = {int(key): value for key, value in setup["inputs"].items()}
    try:
        text, ids_path = latency_runners.RUNNERS[runner][0](setup)
    except ImportError as error:  # a peer not installed: the table says so
        print(f"skipped ({error})", flush=True)
        return
    ids = {}
    if ids_path is not None:  # tokenized ahead: the ids row times the model alone
        prepare_ids, ids_call = ids_path
        ids = {key: [prepare_ids(batch) for batch in batches] for key, batches in inputs.items()}
    print("ready", flush=True)
    for line in sys.stdin:
        kind, shape, number = line.split()
        shape, number = int(shape), int(number)
        if kind == "burst":
            batches = inputs[shape]
            for call in range(WARMUP_CALLS):
                text(batches[call])
            timed = [_timed(text, batches[call % len(batches)]) for call in range(number)]
            print(json.dumps([[t for t, _ in timed], [n for _, n in timed]]), flush=True)
            continue
        answer = list(_timed(text, inputs[shape][number]))
        answer += list(_timed(ids_call, ids[shape][number])) if ids else [None, None]
        print(json.dumps(answer), flush=True)


# ---- the parent: starts the workers, makes them take turns, prints the table ----


def _start(runner, work_dir):
    command = [sys.executable, "-m", "bench.bench_latency", f"--worker={runner}"]
    command.append(f"--work_dir={work_dir}")
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO_DIR
    )
    return process


def _ask(process, runner, shape, call, kind="turn"):
    process.stdin.write(f"{kind} {shape} {call}\n")
    process.stdin.flush()
    line = process.stdout.readline()
    if not line:
        raise RuntimeError(f"the {runner} worker stopped (exit {process.wait()}); see its stderr")
    return json.loads(line)


def measure_back_to_back(workers, shapes, calls, rounds):
    """{text row: {shape index: ([seconds of each timed call], [lengths])}}: round by round, each
    runner in turn makes `calls` calls in a row."""
    times = {}
    for shape in range(len(shapes)):
        for _ in range(rounds):
            for runner, process in workers.items():
                seconds, lengths = _ask(process, runner, shape, calls, kind="burst")
                entry = times.setdefault(_rows(runner)[0], {}).setdefault(shape, ([], []))
                entry[0].extend(seconds)
                entry[1].extend(lengths)
    return times


def measure(workers, shapes, calls):
    """{row name: {shape index: ([seconds of each timed call], [its padded lengths])}}, the runners
    taking turns call by call."""
    times = {}
    for shape in range(len(shapes)):
        for call in range(WARMUP_CALLS + calls):
            for runner, process in workers.items():
                text_s, text_len, ids_s, ids_len = _ask(process, runner, shape, call)
                if call < WARMUP_CALLS:
                    continue
                for row, seconds, length in zip(
                    _rows(runner), (text_s, ids_s), (text_len, ids_len), strict=True
                ):
                    if row is not None:
                        entry = times.setdefault(row, {}).setdefault(shape, ([], []))
                        entry[0].append(seconds)
                        entry[1].append(length)
    return times


def _limits(config, shapes):
    """{(shape index, row's number format): ms}: max(matmul FLOPs / the measured matmul rate, weight
    bytes / the measured read bandwidth), both measured now, with the runners' threads; and the
    line that says so. int8 rows are held to the float32 matmul rate (no int8 rate is measured)."""
    rates = machine.matmul_rates(("float32", "bfloat16") if _bfloat16() else ("float32",))
    array = np.ones(2**27, np.float32)  # 512 MB, far past any cache
    seconds = timing.timed_in_turns({"read": array.sum}, 7)["read"]
    bandwidth = array.nbytes / float(np.median(seconds))
    hidden, inter = config.hidden_size, config.intermediate_size
    weights = config.num_hidden_layers * (4 * hidden * hidden + 2 * hidden * inter) + hidden**2
    limits = {}
    for index, (batch, length) in enumerate(shapes):
        flops = batch * machine.encoder_flops(config, length)
        for number, size in (("float32", 4), ("bfloat16", 2), ("int8", 1)):
            rate = rates.get(number, rates["float32"])
            limits[index, number] = 1e3 * max(flops / rate / 1e9, weights * size / bandwidth)
    line = (
        f"machine limit: matmul {', '.join(f'{d} {r:.0f}' for d, r in rates.items())} GFLOP/s "
        f"(2048^2 tf.matmul, {FLAGS.threads} threads), memory reads {bandwidth / 1e9:.1f} GB/s "
        f"(numpy sum over 512 MB, one core); encoder matmul weights {weights / 1e6:.1f}M; limit "
        "per call = max(FLOPs / matmul rate, weight bytes / read bandwidth): "
        + ", ".join(f"{b}x{n} {limits[i, 'float32']:.1f} ms" for i, (b, n) in enumerate(shapes))
        + " (float32)"
    )
    return limits, line


def _number_format(row):
    return "bfloat16" if "bf16" in row else "int8" if "int8" in row else "float32"


def _print_table(times, shapes, title, limits):
    names = [f"{batch} x {length}" for batch, length in shapes]
    print(f"\n{title}\n\n| runner | " + " | ".join(f"{n}: p50 / p95 ms" for n in names) + " |")
    print("|---|" + "---|" * len(shapes))
    p50 = {}
    for row, by_shape in times.items():
        cells = []
        for shape in range(len(shapes)):
            seconds, lengths = by_shape[shape]
            p50[row, shape] = 1e3 * float(np.percentile(seconds, 50))
            p95 = 1e3 * float(np.percentile(seconds, 95))
            padded = f" (S={np.mean(lengths):g})" if np.mean(lengths) != shapes[shape][1] else ""
            cells.append(f"{p50[row, shape]:.2f} / {p95:.2f}{padded}")
        print(f"| {row} | " + " | ".join(cells) + " |")
    peer = _rows("transformers")[0]
    for row in times:
        shares = ", ".join(
            f"{n} {limits[s, _number_format(row)] / p50[row, s]:.0%}" for s, n in enumerate(names)
        )
        ratios = ""
        if (peer, 0) in p50 and row != peer:
            ratios = "; p50 / transformers text p50: " + ", ".join(
                f"{n} {p50[row, s] / p50[peer, s]:.2f}x" for s, n in enumerate(names)
            )
        print(f"{row}: share of the machine's limit {shares}{ratios}")
    ours_text, ours_ids = _rows("bert_tf")
    if (ours_ids, 0) in p50:
        share = ", ".join(
            f"{n} {1 - p50[ours_ids, s] / p50[ours_text, s]:.0%}" for s, n in enumerate(names)
        )
        print(f"tokenization's share of bert_tf text p50 (1 - ids / text): {share}")


def _bfloat16():
    return machine.bfloat16_support()[0]


def _setup(work_dir, shapes, runners):
    import keras

    from bert_tf.modeling import BertConfig, BertModel

    config = BertConfig.from_preset(FLAGS.model)
    inputs = _inputs(shapes, max(FLAGS.calls, WARMUP_CALLS + 1))
    setup = dict(
        inputs=inputs, threads=FLAGS.threads, vocab_file=os.path.abspath(FLAGS.vocab_file),
        max_seq_length=FLAGS.max_seq_length, config=config.to_dict(),
    )  # fmt: skip
    keras.utils.set_random_seed(0)
    model = BertModel(config)
    model.build()
    distinct_weights(model)
    scripts.save_encoder(model, os.path.join(work_dir, "encoder"))
    frozen = {"freeze_weights": "true"} if FLAGS.freeze_weights else {}
    if {"bert_tf", "bert_tf_assume_frozen", "litert_float32", "litert_int8"} & set(runners):
        setup["export"] = _export(work_dir, **frozen)
    if {"bert_tf_bf16", "bert_tf_bf16_assume_frozen", "transformers_bf16"} & set(
        runners
    ) and _bfloat16():  # the same weights, kernels stored in bfloat16
        setup["export_bfloat16"] = _export(work_dir, mixed_precision="mixed_bfloat16", **frozen)
    for quantization in ("float32", "int8"):
        if f"litert_{quantization}" in runners and importlib.util.find_spec("ai_edge_litert"):
            # <export_dir>/<version>_serve_ids_<quantization>.tflite, beside the version folder
            version = _export(work_dir, litert=quantization, **frozen)
            setup[f"litert_{quantization}"] = (
                f"{version.rstrip('/')}_serve_ids_{quantization}.tflite"
            )
    with open(os.path.join(work_dir, "setup.json"), "w", encoding="utf-8") as writer:
        json.dump(setup, writer)
    return config


def main(argv):
    del argv
    if FLAGS.worker == "setup":  # the exports, in a process that ends: they hold gigabytes
        _setup(FLAGS.work_dir, parse_shapes(FLAGS.shapes), FLAGS.runners)
        return None
    if FLAGS.worker:
        return worker_main(FLAGS.worker, FLAGS.work_dir)
    from absl import logging

    logging.set_verbosity(logging.WARNING)
    shapes = parse_shapes(FLAGS.shapes)
    unknown = sorted(set(FLAGS.runners) - set(latency_runners.RUNNERS))
    if unknown:
        raise ValueError(f"--runners: unknown {unknown}; known: {sorted(latency_runners.RUNNERS)}")
    if set(FLAGS.protocols) - {"back_to_back", "turns"} or not FLAGS.protocols:
        raise ValueError(f"--protocols: {FLAGS.protocols}; known: back_to_back, turns")
    machine.set_threads(FLAGS.threads)
    print(machine.header(with_tensorflow=False))
    print(
        f"{FLAGS.model}, random weights (each its own); {FLAGS.threads} intra-op and "
        f"{FLAGS.threads} inter-op threads per runner process; back to back: "
        f"{FLAGS.rounds} rounds x {FLAGS.calls} calls per runner and shape, after {WARMUP_CALLS} "
        f"untimed each round; taking turns: {FLAGS.calls} calls per shape, call by call\n",
        flush=True,
    )
    work_dir = tempfile.mkdtemp(prefix="bench_latency_")
    setup = [
        sys.executable,
        "-m",
        "bench.bench_latency",
        "--worker=setup",
        f"--work_dir={work_dir}",
    ]
    flag_names = ("model", "shapes", "runners", "calls", "threads", "max_seq_length")
    setup += [f"--{name}={FLAGS[name].serialize().split('=', 1)[1]}" for name in flag_names]
    setup += [f"--input_file={FLAGS.input_file}", f"--vocab_file={FLAGS.vocab_file}"]
    subprocess.run(setup, check=True, cwd=REPO_DIR)
    from bert_tf.modeling import BertConfig

    config = BertConfig.from_preset(FLAGS.model)
    workers = {}
    for runner in FLAGS.runners:
        process = _start(runner, work_dir)
        said = process.stdout.readline().strip()
        if said != "ready":
            print(f"{runner}: {said or f'skipped (its worker failed, exit {process.wait()})'}")
            process.wait()
            continue
        workers[runner] = process
    limits, limit_line = _limits(config, shapes)
    tables = []
    if "back_to_back" in FLAGS.protocols:
        times = measure_back_to_back(workers, shapes, FLAGS.calls, FLAGS.rounds)
        tables.append((times, "Back to back (each runner's calls in a row):"))
    if "turns" in FLAGS.protocols:
        tables.append((measure(workers, shapes, FLAGS.calls), "Taking turns call by call:"))
    for process in workers.values():
        process.stdin.close()
        process.wait()
    shutil.rmtree(work_dir)  # the exports: 420 + 210 MB at BERT-base
    print(limit_line)
    for times, title in tables:
        _print_table(times, shapes, title, limits)
    print(machine.load_line())


if __name__ == "__main__":
    app.run(main)
