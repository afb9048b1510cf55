"""Sentence (pair) classification and regression, run_classifier.py's task, and its multi-label variant.

`task.py`: the model (BertModel + a head over [CLS]), its run and export (`ClassifierRun`, `SPEC`);
`multi_label.py`: the multi-label variant (`--multi_label`); `data/`: GLUE, XNLI, TSV / CSV and TFDS
readers and the features. Its settings are `tasks/task_settings.py`'s `ClassifierSettings` and
`MultiLabelSettings`. Nothing is imported here: import the modules.
"""
