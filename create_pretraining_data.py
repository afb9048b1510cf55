"""Raw text -> masked-LM + next-sentence pretraining TFRecords (BERT's create_pretraining_data.py).

Streams the corpus (memory does not grow with it) and makes instances in parallel processes, without
TensorFlow. The files are readable by the original run_pretraining.py and by ours.

    python create_pretraining_data.py --input_file=corpus/*.txt --output_file=out.tfrecord \
        --vocab_file=vocab.txt --do_lower_case=True --max_seq_length=128 \
        --max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=10
"""

from bert_tf import cli
from bert_tf.data.pretraining import writer


def cli_main():
    """Console entry point `bert-create-pretraining-data`."""
    cli.main(writer.CreateConfig, writer.run, __name__)


if __name__ == "__main__":
    cli_main()
