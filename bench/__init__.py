"""The benchmarks, run as a package from the repository's root: `python -m bench.run_all` (every step) or
`python -m bench.bench_latency` (one). Shared helpers: `machine` (what a table ran on), `timing` (how a
call is timed), `stats` (means and standard errors), `report` (results/run_all.md and .json), `figures`
(README's results table, from the records), `corpora` and `minilm` (the data and the model the
real-text benches read), `scripts` (the project's scripts run as a user runs them).
"""

import os

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
# The shared data folder (data/, fixtures/): ../shared beside the repository, or $BERT_TF_SHARED_DIR.
SHARED_DIR = os.environ.get("BERT_TF_SHARED_DIR", os.path.join(REPO_DIR, "..", "shared"))
