"""The feature-based approach (BERT paper §5.3, Table 7): a frozen BERT's layers feed a BiLSTM tagger.

run_ner.py --feature_layers=... freezes the encoder and trains a two-layer BiLSTM and a dense layer
over the labels on the outputs of the chosen layers, as the paper does for CoNLL-2003 (the choices,
and the network itself, are bert_tf/models/networks/feature_tagger_network.py's).

The encoder runs once per split: its layers are cached on disk (bert_tf/data/encoder_features.py)
and the head trains on the cache, so a second run with another head size or learning rate never
runs the encoder. The checkpoints hold the encoder (unchanged) and the head, so prediction from
them, export_saved_model.py and --export_dir work as for a fine-tuned tagger; the export runs the
frozen encoder and the head on raw text (bert_tf/models/networks/tagging_serving.py).

B = batch, S = sequence length, K = layers read, H = hidden size, L = number of labels.
"""

import json
import os

import tensorflow as tf

from bert_tf.checkpoints import encoder_variable_names, restore_init_checkpoint
from bert_tf.data.encoder_features import (
    cached_encoder_features,
    make_encoder_feature_dataset,
    padding_window,
    settings_digest,
    weights_fingerprint,
)
from bert_tf.data.feature_cache import SETTINGS_SUFFIX
from bert_tf.errors import InputError
from bert_tf.export import ID_FEATURES
from bert_tf.modeling import BertModel
from bert_tf.models.networks import feature_tagger_network
from bert_tf.tasks.finetuning import FineTuningRun
from bert_tf.tasks.spec import TaskSpec
from bert_tf.tasks.tagging import conll
from bert_tf.tasks.tagging import task as tagging
from bert_tf.tasks.task_settings import FeatureTaggerSettings

# ---------------------------------------------------------------------------------- the task


SPEC = TaskSpec.of(
    feature_tagger_network.NETWORK,
    settings_class=FeatureTaggerSettings,
    variant_of=tagging.SPEC,
    chosen_by="feature_layers",
)


class FeatureTaggerTask(tagging.TaggerTask):
    """run_ner.py --feature_layers: the tagger's data and steps, on the frozen encoder's cached layers."""

    spec = SPEC

    def __init__(self, run):
        super().__init__(run)
        self._frozen = None  # (BertModel, fingerprint) of the encoder's weights

    def check_own_settings(self, bert_config):
        settings = self.settings
        self.layer_indices = feature_tagger_network.layer_indices(
            settings.feature_layers, bert_config.num_hidden_layers
        )
        if not settings.init_checkpoint and not self.run.resumes():
            raise InputError(
                "--feature_layers freezes the encoder: pass --init_checkpoint (a pretrained BERT) "
                "for its weights"
            )

    def check_checkpoint(self):
        info = self.run.checkpoint_task_info()
        if (
            info is not None
            and info.model_type == feature_tagger_network.MODEL_TYPE
            and self.run.checkpoint_heads != "skip"
        ):
            for name in ("feature_layers", "lstm_size"):
                ours, theirs = getattr(self.settings, name), getattr(info.settings, name)
                if ours != theirs:
                    raise InputError(
                        f"--{name}={ours}, but the checkpoint's run has {name}={theirs} (its "
                        f"task.json): pass --{name}={theirs}, or --restore_head=false"
                    )

    # ------------------------------------------------------------------ the cached layers

    def frozen_encoder(self):
        """(BertModel, fingerprint): the encoder of the checkpoint the run's model starts from
        (--output_dir's when resuming, else --init_checkpoint's), built and loaded, not run."""
        if self._frozen is None:
            source = (
                self.settings.output_dir if self.run.resumes() else self.settings.init_checkpoint
            )
            # Under the run's dtype policy: the cache then holds what the model's encoder computes.
            bert = BertModel(self.run.bert_config, dtype=self.settings.mixed_precision)
            bert.build()
            restore_init_checkpoint(bert, source)
            weights = {
                name: variable.numpy()
                for name, variable in encoder_variable_names(bert).items()
                if not name.startswith("bert/pooler/")  # no layer the features read
            }
            self._frozen = bert, weights_fingerprint(weights)
        return self._frozen

    def cache_file(self, split):
        """(path, key) of the split's cached layers, and (path, info) of its token features
        (tagging's, in output_dir): the cache's key is everything the layers depend on."""
        token_path, token_info = super().features(split)
        settings = self.settings
        with tf.io.gfile.GFile(token_path + SETTINGS_SUFFIX) as f:
            token_settings = json.load(f)["settings"]
        key = {
            "format": "bert_tf encoder features 1",
            "tokens": token_settings,  # data file, vocab, do_lower_case, max_seq_length, ...
            "encoder": self.frozen_encoder()[1],
            "bert_config": self.run.bert_config.to_dict(),
            "mixed_precision": settings.mixed_precision,
            "layers": list(self.layer_indices),
        }
        folder = settings.encoder_features_dir or settings.feature_dir or settings.output_dir
        name = f"{split}.encoder_features.{settings_digest(key)}.tf_record"
        return (os.path.join(folder, name), key), (token_path, token_info)

    def features(self, split):
        """The split's cached layers, made once (the encoder runs only then); (path, info)."""
        (path, settings), (token_path, token_info) = self.cache_file(split)
        tf.io.gfile.makedirs(os.path.dirname(path))
        bert = self.frozen_encoder()[0]
        input_specs = {name: tf.TensorSpec([None, None], tf.int32) for name in ID_FEATURES}
        encode = tf.function(
            lambda inputs: tf.cast(
                feature_tagger_network.encoder_layers(bert, inputs, self.layer_indices), tf.float32
            ),
            input_signature=[input_specs],
        )
        info = cached_encoder_features(
            path,
            settings,
            token_path,
            conll.tagging_feature_spec(self.settings.max_seq_length),
            token_info,
            encode,
            self.settings.predict_batch_size,
        )
        return path, info

    def dataset(self, path, batch_size, is_training, input_context=None, num_records=None):
        """The cached layers in batches, each cut to its longest window (whatever
        --cut_batches_to_longest and --length_bucketing say: the cache holds no padding)."""
        return make_encoder_feature_dataset(
            path,
            len(self.layer_indices),
            self.run.bert_config.hidden_size,
            batch_size,
            is_training,
            input_context=input_context,
            seed=self.settings.seed,
            num_records=num_records,
        )

    def dummy_batch(self):
        window = padding_window(len(self.layer_indices), self.run.bert_config.hidden_size, length=2)
        return {name: value[None] for name, value in window.items()}


class FeatureTaggerRun(FineTuningRun):
    """One run_ner.py --feature_layers invocation: a FineTuningRun of a FeatureTaggerTask."""

    def __init__(self, settings):
        super().__init__(settings, FeatureTaggerTask)
