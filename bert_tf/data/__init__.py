"""Data: pretraining instances and TFRecord I/O, task readers. Import submodules directly."""
