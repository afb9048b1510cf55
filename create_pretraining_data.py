"""Raw text -> masked-LM + next-sentence pretraining TFRecords (BERT's create_pretraining_data.py).

Streams the corpus (memory does not grow with it) and makes instances in parallel processes.
The files are readable by the original run_pretraining.py and by bert_tf.data.pretraining.

    python create_pretraining_data.py --input_file=corpus/*.txt --output_file=out.tfrecord \
        --vocab_file=vocab.txt --do_lower_case=True --max_seq_length=128 \
        --max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=10
"""

import os

from absl import app, flags

from bert_tf import tokenization
from bert_tf.cli import run as run_script
from bert_tf.data.pretraining import instances, writer

flags.DEFINE_string(
    "input_file",
    None,
    "Input raw text file(s): comma-separated, globs allowed. One sentence per "
    "line, a blank line between documents.",
)
flags.DEFINE_string(
    "output_file",
    None,
    "Output TFRecord file(s), comma-separated; instances are dealt round-robin.",
)
flags.DEFINE_string("vocab_file", None, "The WordPiece vocabulary file the model is trained with.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the text (uncased models). Default True.")
flags.DEFINE_bool(
    "do_whole_word_mask",
    False,
    "Mask whole words (a word and its ## pieces together). Default False.",
)
flags.DEFINE_integer(
    "max_seq_length", 128, "Tokens per example, [CLS]/[SEP] included. Default 128."
)
flags.DEFINE_integer(
    "max_predictions_per_seq", 20, "Most masked-LM predictions per example. Default 20."
)
flags.DEFINE_integer("random_seed", 12345, "Seed of every random choice. Default 12345.")
flags.DEFINE_integer(
    "dupe_factor", 10, "Passes over the input, each with different masks. Default 10."
)
flags.DEFINE_float("masked_lm_prob", 0.15, "Fraction of tokens to predict. Default 0.15.")
flags.DEFINE_float(
    "short_seq_prob",
    0.1,
    "Probability of a document's target length being random and shorter than "
    "max_seq_length. Default 0.1.",
)
flags.DEFINE_integer(
    "num_workers",
    None,
    "Processes making instances; default: the number of cores; 1 = in-process. "
    "The output does not depend on it.",
)
flags.DEFINE_integer(
    "chunk_bytes",
    1 << 18,
    "Bytes of input text per work unit (whole consecutive documents, two at least); a 'random "
    "next' segment is drawn from another document of the same unit (the original: from the whole "
    "corpus). Memory per worker grows with it. Default 262144 (256 KiB).",
)
flags.DEFINE_integer(
    "shuffle_buffer_size",
    1 << 16,
    "Instances in the writer's shuffle buffer (about 1 KB each at "
    "max_seq_length 128). Default 65536.",
)
flags.DEFINE_enum(
    "output_compression",
    "",
    ["", "gzip"],
    "'' for plain TFRecords, 'gzip' for compressed ones "
    "(read with compression_type='GZIP'). Default ''.",
)
flags.DEFINE_bool(
    "skip_invalid_utf8",
    False,
    "Skip (and count) input lines that are not valid UTF-8 instead of "
    "stopping with an error naming the file and line. Default False.",
)
flags.DEFINE_float("progress_interval_s", 10.0, "Seconds between progress lines. Default 10.")

FLAGS = flags.FLAGS


def main(argv):
    del argv
    for name in ("input_file", "output_file", "vocab_file"):
        if not getattr(FLAGS, name):
            raise app.UsageError(f"--{name} is required")
    if not os.path.isfile(FLAGS.vocab_file):
        raise FileNotFoundError(f"--vocab_file {FLAGS.vocab_file!r} does not exist")
    tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case)
    options = instances.InstanceOptions.from_vocab(
        tokenizer.vocab,
        max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        masked_lm_prob=FLAGS.masked_lm_prob,
        short_seq_prob=FLAGS.short_seq_prob,
        do_whole_word_mask=FLAGS.do_whole_word_mask,
    )
    writer.create_pretraining_data(
        FLAGS.input_file,
        FLAGS.output_file,
        tokenizer,
        options,
        dupe_factor=FLAGS.dupe_factor,
        random_seed=FLAGS.random_seed,
        num_workers=FLAGS.num_workers,
        chunk_bytes=FLAGS.chunk_bytes,
        shuffle_buffer_size=FLAGS.shuffle_buffer_size,
        compression=FLAGS.output_compression,
        skip_invalid_utf8=FLAGS.skip_invalid_utf8,
        progress_interval_s=FLAGS.progress_interval_s,
    )


def cli():
    """Console entry point `bert-create-pretraining-data`."""
    run_script(main, __name__)


if __name__ == "__main__":
    cli()
