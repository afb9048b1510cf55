"""Token classification (NER), run_ner.py's task, and its feature-based variant.

`task.py`: the model (BertModel + a head over every token), its run and export (`TaggerRun`,
`SPEC`); `serving.py`: the export's in-graph word splitting and windows; `conll.py` reads CoNLL
files and makes the windowed features; `entity_metrics.py` scores entities as conlleval does;
`feature_based.py` and `feature_head.py`: the variant that trains a BiLSTM on a frozen encoder's
layers (`--feature_layers`). Its settings are `tasks/task_settings.py`'s `TaggerSettings` and
`FeatureTaggerSettings`. Nothing is imported here: import the modules.
"""
