"""Raw text -> a WordPiece vocabulary file, with Google's learner (the original release had no such tool).

    python build_vocab.py --input_file=corpus/*.txt --vocab_file=vocab.txt --vocab_size=30522 \
        --do_lower_case=True --num_unused=100

Words are the original BasicTokenizer's, counted as the files stream past; the counts go to
tensorflow-text's WordPiece learner (bert_tf/vocabulary.py). The file starts [PAD] [UNK] [CLS] [SEP]
[MASK], then the [unusedN] slots. With --beam_pipeline_options=KEY=VALUE,... the words are counted by
an Apache Beam pipeline, and the file is byte-identical to the one-machine run's.
"""

from bert_tf import cli, vocabulary

# The flags: bert_tf/vocabulary.py.
SETTINGS = vocabulary.VocabSettings


def run(settings):
    """One machine, or Beam when --beam_pipeline_options is given; returns the vocabulary."""
    if settings.beam_pipeline_options:
        from bert_tf.beam import vocabulary as beam_vocabulary

        return beam_vocabulary.run(settings)
    return vocabulary.run(settings)


def cli_main():
    """Console entry point `bert-build-vocab`."""
    cli.main(SETTINGS, run, __name__)


if __name__ == "__main__":
    cli_main()
