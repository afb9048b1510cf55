"""The training input of this worker: an iterator at the run's position, and one batch per replica.

A worker reads one tf.data pipeline (the dataset_fn of its InputContext) and hands its replicas
consecutive batches, as tf.distribute's own per-worker input does; unlike that input's iterator, a
plain tf.data iterator can be checkpointed (bert_tf.training.checkpoint_state). A TPU takes its input from a
distributed dataset instead, whose iterator no checkpoint keeps: it resumes by skipping.
"""

import tensorflow as tf
from absl import logging


class TrainInput:
    """This worker's training batches for a strategy.

    Args:
      task: the training.Task (its dataset_fn).
      strategy: the tf.distribute strategy.
      train_batch_size: the global batch (all replicas, all micro-batches).
      context: this worker's tf.distribute.InputContext (distribute.input_context).
    """

    def __init__(self, task, strategy, train_batch_size, context):
        self.task, self.strategy, self.context = task, strategy, context
        self.train_batch_size = train_batch_size

    @property
    def local_replicas(self):
        """The replicas this worker feeds."""
        return self.context.num_replicas_in_sync // self.context.num_input_pipelines

    def iterator(self, skip=0, restore=None):
        """An iterator over the training input, past the first `skip` global batches.

        Args:
          skip: the global batches trained on before (0 for a new run).
          restore: (tf.data iterator) -> bool, puts the iterator at its saved position and says
            whether it could (CheckpointState.restore_input); when it cannot, the iterator reads
            through the `skip` batches instead.
        """
        if isinstance(self.strategy, tf.distribute.TPUStrategy):
            return iter(
                distribute(self.task, self.strategy, self.train_batch_size, True, skip=skip)
            )
        per_replica = self.train_batch_size // self.strategy.num_replicas_in_sync
        iterator = iter(self.task.dataset_fn(self.context, per_replica, True))
        if skip and not (restore is not None and restore(iterator)):
            _advance(iterator, skip * self.local_replicas)
        return iterator

    def next_batch(self, iterator):
        """The next global batch for strategy.run: one batch per replica of this worker, in order."""
        if isinstance(iterator, tf.data.Iterator):
            batches = [next(iterator) for _ in range(self.local_replicas)]
            return self.strategy.experimental_distribute_values_from_function(
                lambda context: batches[context.replica_id_in_sync_group % len(batches)]
            )
        return next(iterator)


def saveable(iterator):
    """The iterator if a checkpoint can keep its position (a tf.data iterator), else None."""
    return iterator if isinstance(iterator, tf.data.Iterator) else None


def distribute(task, strategy, batch_size, is_training, skip=0):
    """The task's input as a distributed dataset of global batches of `batch_size`, `skip` skipped."""
    per_replica = batch_size // strategy.num_replicas_in_sync
    if skip:  # TPU: read on where the run stopped by skipping the batches trained on
        logging.info("Skipping the %d global batches of the input trained on before", skip)

    def dataset_fn(input_context):
        dataset = task.dataset_fn(input_context, per_replica, is_training)
        # Each step takes one batch per replica; a pipeline feeds the replicas of its worker.
        per_pipeline = input_context.num_replicas_in_sync // input_context.num_input_pipelines
        return dataset.skip(skip * per_pipeline) if skip else dataset

    return strategy.distribute_datasets_from_function(dataset_fn)


@tf.function
def _advance(iterator, num_batches):
    """Reads num_batches from iterator (a resume from a checkpoint that kept no input position)."""
    for _ in tf.range(num_batches):
        next(iterator)
