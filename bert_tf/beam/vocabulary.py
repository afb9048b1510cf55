"""build_vocab.py as an Apache Beam pipeline: the words counted on many workers, the same file.

    input files -> spread over the workers -> each file's word counts (streamed)
      -> summed per word (a Beam combine: CombinePerKey)
      -> all the counts, as one list, into the learner (bert_tf.vocabulary.learn_vocab)

The learner sees the same counts as on one machine, sorted, so the vocabulary file is byte-identical
to the one-machine run's. Memory: a worker holds one file's distinct words; the learner's worker holds
the corpus's distinct words (as the one-machine run does), never the text. The file is written where
the learner runs, atomically, through TensorFlow's file systems for URLs (gs://...).
Bad input is refused before the pipeline is submitted (a pattern matching nothing, an unknown option,
for local files invalid UTF-8 with file and line); a worker's error comes back as the same one line.
"""

from absl import logging

from bert_tf import file_io, vocabulary
from bert_tf.beam import pipeline
from bert_tf.beam.pretraining_data import match_inputs
from bert_tf.sigterm import doing


def run(config):
    """build_vocab.py --beam_pipeline_options=...: checks everything, counts on Beam, learns, writes.

    Returns:
      The number of tokens written.
    """
    options = pipeline.parse_options(config.beam_pipeline_options)
    vocabulary.check_config(config)  # the flags, and a pattern matching nothing, as one machine
    inputs = match_inputs(config.input_file)
    for path, _ in inputs:
        if not file_io.is_url(path):
            file_io.check_utf8(path)
    beam_pipeline = pipeline.make_pipeline(options)
    _build(beam_pipeline, [path for path, _ in inputs], config)
    logging.info("Beam: counting the words of %d file(s)", len(inputs))
    with doing(f"writing {config.vocab_file}"):
        pipeline.run(beam_pipeline)
    with file_io.open_binary(config.vocab_file) as f:
        return sum(1 for _ in f)


def _build(beam_pipeline, paths, config):
    beam = pipeline.import_beam()
    (
        beam_pipeline
        | "Files" >> beam.Create(paths)
        | "Spread files" >> beam.Reshuffle()
        | "Count each file" >> beam.ParDo(_CountFileWords(config.do_lower_case))
        | "Sum per word" >> beam.CombinePerKey(sum)
        | "All counts" >> beam.combiners.ToList()
        | "Learn and write" >> beam.Map(_learn_and_write, config)
    )


def _learn_and_write(counts, config):
    with pipeline.worker_input_errors():
        vocabulary.learn_and_write(dict(counts), config)


class _CountFileWords(pipeline.import_beam().DoFn):
    """path -> (word, count) of its BasicTokenizer words, the file streamed."""

    def __init__(self, do_lower_case):
        self._do_lower_case = do_lower_case

    def process(self, path):
        from apache_beam.io.filesystems import FileSystems

        from bert_tf.tokenization import BasicTokenizer

        with pipeline.worker_input_errors(), FileSystems.open(path) as f:
            lines = (line for _, line in file_io.decode_lines(f, path))
            counts = vocabulary.count_words(lines, BasicTokenizer(self._do_lower_case))
        yield from counts.items()
