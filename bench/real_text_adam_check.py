"""Is ours ahead of transformers on real text because of the original's AdamW? A check.

The original's AdamW (ours keeps it) has no bias correction. Torch's bias-corrected step times
(1 - beta1^t) / sqrt(1 - beta2^t) is the uncorrected one: 3.2 at step 1, 5 at step 39, 1.26 at step
1,000. This runs bench_real_text.py's transformers column at ours' setting with that factor in its
learning-rate schedule, on the same split (the same --<set>_sizes flags give the same split), and
prints one JSON line per seed. If transformers then lands on ours' accuracy, the gap in
bench_real_text's table is the optimizer's bias correction, a property of the original's recipe.

    /tmp/serving-venv/bin/python -m bench.real_text_adam_check --sets=rotten_tomatoes \\
        --rotten_tomatoes_sizes=400,200,500 --learning_rate=5e-5 --epochs=3 --seeds=1,2
"""

import json
import math

from absl import app, flags

from bench import bench_real_text  # its flags: --sets, --<set>_sizes, --seeds, --work_dir, ...

FLAGS = flags.FLAGS
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate (ours' chosen setting).")
flags.DEFINE_float("epochs", 3.0, "Epochs (ours' chosen setting).")

BETA_1, BETA_2 = 0.9, 0.999  # torch's AdamW defaults, which the transformers column uses


def without_bias_correction(corrected):
    """bench_real_text's optimizer factory, its schedule times (1 - b1^t) / sqrt(1 - b2^t)."""

    def make(model, learning_rate, total_steps):
        import torch

        optimizer, _ = corrected(model, learning_rate, total_steps)
        warmup = int(0.1 * total_steps)

        def factor(step):  # LambdaLR's step 0 sets the rate of the first update, t = 1
            base = step / warmup if step < warmup else max(0.0, 1.0 - step / total_steps)
            t = step + 1
            return base * (1 - BETA_1**t) / math.sqrt(1 - BETA_2**t)

        return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)

    return make


def main(argv):
    del argv
    bench_real_text.transformers_optimizer = without_bias_correction(
        bench_real_text.transformers_optimizer
    )
    bench_real_text.machine.set_threads(FLAGS.threads)
    for name in FLAGS.sets:
        _, (train, dev, test), notes = bench_real_text.prepare(name, FLAGS.work_dir)
        print(f"{name}: {notes}", flush=True)
        for seed in (int(s) for s in FLAGS.seeds):
            scores = bench_real_text.transformers_run(
                name, train, dev, test, FLAGS.learning_rate, FLAGS.epochs, seed
            )
            row = {"set": name, "seed": seed, "adam": "no bias correction", **scores}
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    app.run(main)
