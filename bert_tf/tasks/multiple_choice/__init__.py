"""Multiple choice (SWAG), run_swag.py's task.

`task.py`: the model (BertModel + a one-unit head over each choice's [CLS]), its run and export
(`MultipleChoiceRun`, `SPEC`); `swag.py` reads SWAG's csv and jsonl files and packs the choices.
Its settings are `tasks/task_settings.py`'s `MultipleChoiceSettings`. Nothing is imported here: import
the modules.
"""
