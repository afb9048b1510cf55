"""Fine-tune BERT as a sentence embedder (a bi-encoder) on (anchor, positive[, hard negative]) rows.

The original run_classifier.py's flags, plus --distribution_strategy, --mixed_precision, --jit_compile,
--seed, --export_dir (a SavedModel serving raw text -> "embeddings" [batch, hidden]), --data_dir,
--pooling, --normalize and --similarity_scale. Reads train.tsv and dev.tsv (anchor<TAB>positive
[<TAB>hard negative] per line; or train.jsonl, dev.jsonl) and test.txt (one text per line; or
test.jsonl) from --data_dir. The loss is in-batch negatives: a softmax over the cosine similarities
(times --similarity_scale, 20) of each anchor with every positive and hard negative of its batch.
Writes train/eval/predict.tf_record (reused while their settings match), checkpoints
(model.ckpt-<step>), task.json, eval_results.txt (eval_recall@1, eval_recall@10, eval_mrr@10 and
eval_loss over the dev set's candidates) and test_results.tsv (one tab-separated embedding per line of
the test file) to --output_dir. Restarting with the same --output_dir resumes training.

Start from a converted sentence-transformers model (convert_checkpoint.py writes its pooling into
embedding.json) to fine-tune it further with its own pooling and normalisation.
"""

from bert_tf import cli

cli.load_tensorflow_quietly()

from bert_tf import tasks  # noqa: E402 (after TensorFlow's quiet start)

TASK = tasks.TASKS["embedding"]
# The flags: EmbeddingSettings (bert_tf/tasks/task_settings.py) and the shared ones it derives from
# (bert_tf/shared_settings.py).
SETTINGS = tasks.script_settings(TASK)


def make_run(settings):
    """The run the flags ask for: a sentence embedder's, or a sweep of such runs when a sweep
    flag lists several values."""
    return tasks.make_run(TASK, settings)


def cli_main():
    """Console entry point `bert-run-embedding`."""
    cli.run_main(SETTINGS, make_run, __name__)


if __name__ == "__main__":
    cli_main()
