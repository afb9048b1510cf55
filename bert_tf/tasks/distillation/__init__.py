"""Knowledge distillation of a fine-tuned classifier into a shallower student (run_distillation.py).

Its modules (this file imports none of them); its settings are tasks/task_settings.py's
DistillationSettings (the classifier's flags, plus the teacher, the student and the loss):
  teacher.py  the teacher's run folder read and checked; its logits of texts, cached by text
  run.py      the run: a classifier's run whose task is given a Distillation (its training
              features carry the teacher's logits, its loss is the student's)
The loss and the student's layers and weights are bert_tf/models/distillation.py's (the Keras way
shares them).
"""
