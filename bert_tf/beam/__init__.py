"""Apache Beam pipelines: pretraining data and batch prediction beyond one machine.

The only package that imports apache_beam (the `[beam]` extra: `pip install -e .[beam]`). The
pipelines run on whichever runner `--beam_pipeline_options` names: Dataflow, Flink, Spark, or here
the local FnApiRunner (`runner=DirectRunner`), which needs no download.
"""
