"""The networks of the tasks by model_type, and the one a Google checkpoint's head names.

bert_tf.tasks.TASKS lists the same networks with their runs' settings; this list is what a layer
below the runs (bert_tf/formats, export_saved_model.py's library) finds a network by.
"""

import os

import tensorflow as tf

from bert_tf.errors import InputError
from bert_tf.models.networks import (
    classifier_network,
    embedder_network,
    feature_tagger_network,
    multiple_choice_network,
    squad_network,
    tagger_network,
)
from bert_tf.models.networks.task_info import TaskInfo, read_labels

# In the order a Google checkpoint's head is looked for (infer_from_google): the first match wins.
NETWORKS = {
    network.name: network
    for network in (
        classifier_network.NETWORK,
        classifier_network.MULTI_LABEL_NETWORK,
        squad_network.NETWORK,
        tagger_network.NETWORK,
        feature_tagger_network.NETWORK,
        multiple_choice_network.NETWORK,
        embedder_network.NETWORK,
    )
}


def network_of(model_type):
    """The NetworkSpec of a model_type (task.json's), or InputError naming the known ones."""
    if model_type not in NETWORKS:
        raise InputError(f"model_type must be one of {sorted(NETWORKS)}, got {model_type!r}")
    return NETWORKS[model_type]


def infer_from_google(prefix):
    """The TaskInfo a Google-format checkpoint's head variables imply (an encoder if none)."""
    shapes = dict(tf.train.list_variables(prefix))
    for network in NETWORKS.values():
        if network.google_head and network.google_head in shapes:
            info = TaskInfo(
                model_type=network.name,
                **network.info_from_google_head(shapes[network.google_head]),
            )
            if info.labels is not None:  # label strings from a labels.txt beside it, if any
                labels = read_labels(os.path.dirname(prefix))
                if labels is not None and len(labels) != len(info.labels):
                    raise InputError(
                        f"labels.txt beside {prefix} holds {len(labels)} labels, but the "
                        f"checkpoint's head has {len(info.labels)}"
                    )
                info.labels = labels or info.labels
            return info
    return TaskInfo(model_type="encoder")
