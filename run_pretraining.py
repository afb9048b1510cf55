"""Pretrain BERT (masked LM + next sentence prediction) on TFRecords of create_pretraining_data.py.

The visible devices by default (the CPU, the one GPU, or mirrored over several; --num_gpus=N picks N,
0 the CPU), several machines
(--distribution_strategy=multi_worker_mirrored with TF_CONFIG) or a Cloud TPU (--use_tpu --tpu_name=...).
Writes checkpoints (model.ckpt-<step>), TensorBoard summaries, bert_model.ckpt.* + bert_config.json
(Google's format, after training) and eval_results.txt to --output_dir. Restarting with the same
--output_dir resumes from its latest checkpoint. With --dynamic_masking=True it reads unmasked records
(create_pretraining_data.py --dynamic_masking=True) and masks each afresh on every pass, by
--masked_lm_prob, --max_predictions_per_seq and --do_whole_word_mask.
"""

from bert_tf import cli

cli.load_tensorflow_quietly()

from bert_tf.tasks import pretraining  # noqa: E402 (after TensorFlow's quiet start)

# The flags: bert_tf/tasks/pretraining.py and the shared ones (bert_tf/shared_settings.py).
SETTINGS = pretraining.PretrainingSettings


def run(settings):
    """Pretrains and/or evaluates as `settings` (a PretrainingSettings) says; returns the Trainer."""
    return pretraining.PretrainingRun(settings).run()


def cli_main():
    """Console entry point `bert-run-pretraining`."""
    cli.run_main(SETTINGS, pretraining.PretrainingRun, __name__)


if __name__ == "__main__":
    cli_main()
