"""One module per fine-tuning or pretraining task: its model, loss, metrics, input and export signatures.

Scripts parse flags and call a task; bench/ and the demo import tasks, never scripts. Each task hands
`bert_tf.training.Trainer` a `Task` and `bert_tf.export` its serving signatures.
"""
