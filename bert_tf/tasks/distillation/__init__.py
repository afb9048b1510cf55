"""Knowledge distillation of a fine-tuned classifier into a shallower student (run_distillation.py).

Its modules (this file imports none of them):
  config.py   DistillationConfig: run_distillation.py's flags (the classifier's, plus the teacher,
              the student and the loss)
  loss.py     the loss: the teacher's softened probabilities (Hinton et al., 2015) and the labels
  student.py  the student's BertConfig, which teacher layers it keeps, its first weights
  teacher.py  the teacher's run folder read and checked; its logits of texts, cached by text
  run.py      the run: a classifier's run whose training features carry the teacher's logits
"""
