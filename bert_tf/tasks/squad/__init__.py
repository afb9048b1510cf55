"""SQuAD 1.1 / 2.0 question answering, run_squad.py's task.

`task.py`: the model (BertModel + a start/end head over every token), its run and export
(`SquadRun`, `SPEC`); `serving.py`: the export's in-graph windowing and n-best answers; `examples.py`
reads the json, `data.py` makes the windowed features, `predictions.py` turns logits into answer
texts. The official scores are `bert_tf/squad_evaluation.py` (evaluate_squad.py's, which needs no
TensorFlow). Its settings are `tasks/task_settings.py`'s `SquadSettings`. Nothing is imported here:
import the modules.
"""
