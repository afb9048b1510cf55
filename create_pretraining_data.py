"""Raw text -> masked-LM + next-sentence pretraining TFRecords (BERT's create_pretraining_data.py).

Streams the corpus (memory does not grow with it) and makes instances in parallel processes, without
TensorFlow. The files are readable by the original run_pretraining.py and by ours.

    python create_pretraining_data.py --input_file=corpus/*.txt --output_file=out.tfrecord \
        --vocab_file=vocab.txt --do_lower_case=True --max_seq_length=128 \
        --max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=10

With --dynamic_masking=True the instances are written unmasked, and run_pretraining.py
--dynamic_masking=True masks them afresh on every pass (docs/pretraining_from_scratch.md).
With --beam_pipeline_options=KEY=VALUE,... the same flags run as an Apache Beam pipeline (Dataflow,
Flink, Spark, or Beam's local runner) and write the same records as shards <output_file>-SSSSS-of-NNNNN.
"""

from bert_tf import cli
from bert_tf.data.pretraining import writer

# The flags: bert_tf/data/pretraining/writer.py and the shared ones (bert_tf/shared_settings.py).
SETTINGS = writer.CreateSettings


def run(settings):
    """One machine, or Beam when --beam_pipeline_options is given."""
    if settings.beam_pipeline_options:
        from bert_tf.beam import pretraining_data

        return pretraining_data.run(settings)
    return writer.run(settings)


def cli_main():
    """Console entry point `bert-create-pretraining-data`."""
    cli.main(SETTINGS, run, __name__)


if __name__ == "__main__":
    cli_main()
