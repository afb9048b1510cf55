"""Data every task shares: TFRecord I/O, packing, the features cache, the encoder's cached layers,
pretraining instances. A task's own reader is in its folder (bert_tf/tasks/<task>/). Import
submodules directly."""
