"""The from-scratch study's pretraining (bench/bench_from_scratch.py): vocabulary, records, runs, curves.

Every step goes through the library path of a script: bert_tf.vocabulary (build_vocab.py),
bert_tf.data.pretraining.writer (create_pretraining_data.py) and bert_tf.tasks.pretraining
(run_pretraining.py). Each function writes its output last and whole, so a caller can skip a step
whose output exists; a pretraining run cut off resumes from its latest checkpoint.
"""

import glob
import json
import os
import re
import shutil

from bert_tf import file_io

# The pretraining runs: {run: (its text, text/<text>.txt; whether its masks are dynamic, as
# create_pretraining_data.py's and run_pretraining.py's --dynamic_masking)}. static and dynamic read
# the same text; dynamic-rt adds Rotten Tomatoes' texts outside its fine-tuning dev and test sets
# (from_scratch_corpus.rotten_tomatoes_text); tapt-rt reads those texts alone, continuing a
# finished run (TASK_ADAPTIVE).
RUNS = {
    "static": ("pretrain", False),
    "dynamic": ("pretrain", True),
    "dynamic-rt": ("pretrain_rt", True),
    "tapt-rt": ("rotten_tomatoes", True),
}
# Task-adaptive runs: {run: (the run whose final weights it starts from, the one set it is
# fine-tuned on)}.
TASK_ADAPTIVE = {"tapt-rt": ("dynamic", "rotten_tomatoes")}


def learn_vocab(text_file, vocab_file, vocab_size):
    """build_vocab.py --input_file=text_file --vocab_file=vocab_file --vocab_size --do_lower_case."""
    from bert_tf import vocabulary

    config = vocabulary.VocabSettings(
        input_file=text_file, vocab_file=vocab_file, vocab_size=vocab_size, do_lower_case=True
    )
    return vocabulary.run(config)


def write_records(text_file, vocab_file, output_file, dynamic, shape, dupe_factor):
    """create_pretraining_data.py on one machine (seed 12345); `shape` = (max_seq_length, max
    predictions per sequence). Returns the number of instances written."""
    from bert_tf.data.pretraining import writer

    max_seq_length, max_predictions = shape
    config = writer.CreateSettings(
        input_file=text_file, output_file=output_file, vocab_file=vocab_file,
        max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions,
        dupe_factor=dupe_factor, random_seed=12345, dynamic_masking=dynamic, num_workers=1,
    )  # fmt: skip
    writer.run(config)
    return count_records(output_file)


def count_records(path):
    import tensorflow as tf

    return sum(1 for _ in tf.data.TFRecordDataset(path))


def write_bert_config(path, vocab_size, shape):
    """bert_config.json of the study's encoder; `shape` = (layers, hidden, heads, intermediate,
    max_position_embeddings)."""
    layers, hidden, heads, intermediate, positions = shape
    config = dict(
        vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
        num_attention_heads=heads, intermediate_size=intermediate, hidden_act="gelu",
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
        max_position_embeddings=positions, type_vocab_size=2, initializer_range=0.02,
    )  # fmt: skip
    file_io.write_text(path, json.dumps(config, indent=2) + "\n")
    return path


def pretrain(records, config_file, output_dir, dynamic, settings, init_checkpoint=None):
    """run_pretraining.py --do_train on `records` into `output_dir` (resuming there): masked LM +
    next sentence, 10% warmup, a checkpoint every quarter of the steps, a log line every 40th.

    settings: {"steps", "batch_size", "learning_rate", "max_seq_length", "max_predictions"}.
    init_checkpoint: the weights to start from, heads included (None: the seed's initial weights).
    """
    from bert_tf.tasks.pretraining import PretrainingRun, PretrainingSettings

    steps = settings["steps"]
    config = PretrainingSettings(
        bert_config_file=config_file, input_file=records, output_dir=output_dir, do_train=True,
        init_checkpoint=init_checkpoint, dynamic_masking=dynamic, max_seq_length=settings["max_seq_length"],
        max_predictions_per_seq=settings["max_predictions"], seed=12345,
        train_batch_size=settings["batch_size"], learning_rate=settings["learning_rate"],
        num_train_steps=steps, num_warmup_steps=steps // 10, save_checkpoints_steps=steps // 4,
        iterations_per_loop=max(1, steps // 40), log_steps=max(1, steps // 40),
    )  # fmt: skip
    PretrainingRun(config).run()


def checkpoint_steps(output_dir):
    """{step: checkpoint prefix} of a run's training checkpoints (model.ckpt-<step>)."""
    found = {}
    for index in glob.glob(os.path.join(output_dir, "model.ckpt-*.index")):
        prefix = index[: -len(".index")]
        found[int(re.search(r"ckpt-(\d+)$", prefix).group(1))] = prefix
    return found


def evaluate_heldout(records, num_records, config_file, init_checkpoint, eval_dir, settings):
    """Masked-LM (and next-sentence) loss and accuracy of a checkpoint (None: the seed's initial
    weights) over every held-out record once, with the records' fixed masks.

    Returns:
      eval_results.txt as {name: float}.
    """
    from bert_tf.tasks.pretraining import PretrainingRun, PretrainingSettings

    batch_size = 32
    shutil.rmtree(eval_dir, ignore_errors=True)
    config = PretrainingSettings(
        bert_config_file=config_file, input_file=records, output_dir=eval_dir, do_eval=True,
        init_checkpoint=init_checkpoint, max_seq_length=settings["max_seq_length"],
        max_predictions_per_seq=settings["max_predictions"], seed=12345,
        eval_batch_size=batch_size, max_eval_steps=max(1, num_records // batch_size),
    )  # fmt: skip
    PretrainingRun(config).run()
    with open(os.path.join(eval_dir, "eval_results.txt"), encoding="utf-8") as reader:
        lines = reader.read().splitlines()
    return {k: float(v) for k, v in (line.split(" = ") for line in lines)}


def training_losses(output_dir):
    """[(step, masked-LM training loss of the log interval ending there)] from the run's TensorBoard
    events (output_dir/train)."""
    import tensorflow as tf

    found = {}
    for path in sorted(glob.glob(os.path.join(output_dir, "train", "events.out.tfevents.*"))):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                if value.tag == "masked_lm_loss":
                    found[event.step] = float(tf.make_ndarray(value.tensor))
    return sorted(found.items())


def export_model(
    config_file, vocab_file, init_checkpoint, model_dir, seed=12345, fresh_pooler=False
):
    """model_dir/{bert_config.json, vocab.txt, bert_model.ckpt.*}: the encoder of `init_checkpoint`
    (a training checkpoint), or with None the weights that seed `seed` initializes (random init).
    With fresh_pooler, the pooler (the dense layer over [CLS] that next-sentence prediction trains
    and the classifier reads) keeps the seed's initial weights, as random init has them.
    The folder appears whole (written under a temporary name, then renamed)."""
    import keras

    from bert_tf.checkpoints import export_google_checkpoint, restore_init_checkpoint
    from bert_tf.modeling import BertConfig, BertPretrainingModel

    bert_config = BertConfig.from_json_file(config_file)
    keras.utils.set_random_seed(seed)
    model = BertPretrainingModel(bert_config)
    initial_pooler = [weight.numpy() for weight in model.bert.pooler.weights]
    if init_checkpoint:
        restore_init_checkpoint(model, init_checkpoint)
    if fresh_pooler:
        for weight, value in zip(model.bert.pooler.weights, initial_pooler, strict=True):
            weight.assign(value)
    with file_io.atomic_path(model_dir) as temp:
        os.makedirs(temp)
        export_google_checkpoint(model, bert_config, temp)
        shutil.copy(vocab_file, os.path.join(temp, "vocab.txt"))
    return model_dir
