r"""Any export over many files, on Apache Beam: raw text in, the export's outputs as JSON lines.

    python batch_predict.py --export_dir=exports/sentiment --input_file='reviews/*.tsv' \
        --output_file=predictions/reviews \
        --beam_pipeline_options=runner=DirectRunner,direct_num_workers=2,direct_running_mode=multi_processing

Every export kind works (classifier, multi-label, SQuAD, tagger, multiple choice, encoder): the
input columns are its serving_default's inputs. See bert_tf/beam/batch_prediction.py for the
formats; needs the [beam] extra (pip install -e '.[beam]').
"""

from bert_tf import cli

cli.load_tensorflow_quietly()

from bert_tf.beam import batch_prediction  # noqa: E402 (after TensorFlow's quiet start)

# The flags: bert_tf/beam/batch_prediction.py.
SETTINGS = batch_prediction.BatchPredictSettings


def cli_main():
    """Console entry point `bert-batch-predict`."""
    cli.main(SETTINGS, batch_prediction.run, __name__)


if __name__ == "__main__":
    cli_main()
