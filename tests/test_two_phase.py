"""The paper's two-phase pretraining schedule (appendix A.2; the original README's commands): phase 1 at a
short length, then phase 2 on records of a longer length, from phase 1's checkpoint in a new output dir,
with the optimizer and the step starting again as in the original.

Phase 2 trains at learning rate 0 here, so that its final weights must be phase 1's exactly: that shows
it started from them (a fresh or partly restored model would differ everywhere).
"""

import json

import numpy as np
import pytest
import tensorflow as tf
from test_run_pretraining import run, tiny_flags

from bert_tf.data.pretraining import writer
from bert_tf.errors import InputError

SAMPLE_TEXT = "sample_data/sample_text.txt"
VOCAB = "sample_data/vocab.txt"
PHASES = {1: (32, 5), 2: (64, 10)}  # max_seq_length, max_predictions_per_seq


def tiny_config(path, max_position_embeddings):
    config = json.loads(open("sample_data/bert_config_tiny.json").read())
    config.update(
        max_position_embeddings=max_position_embeddings, hidden_size=32, intermediate_size=64,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    path.write_text(json.dumps(config))
    return str(path)


def write_records(directory, phase):
    max_seq_length, max_predictions = PHASES[phase]
    path = directory / f"phase{phase}.tfrecord"
    writer.run(
        writer.CreateSettings(
            input_file=SAMPLE_TEXT, output_file=str(path), vocab_file=VOCAB,
            max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions,
            dupe_factor=1, random_seed=7, num_workers=1,
        )
    )  # fmt: skip
    return str(path)


def phase_flags(config, records, output_dir, phase, **overrides):
    max_seq_length, max_predictions = PHASES[phase]
    values = dict(
        max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions, num_train_steps=4,
        do_eval=True, max_eval_steps=1,
    )  # fmt: skip
    return tiny_flags(config, records, output_dir, **{**values, **overrides})


def _weights(prefix):
    reader = tf.train.load_checkpoint(prefix)
    return {
        name: reader.get_tensor(name)
        for name in reader.get_variable_to_shape_map()
        if name.startswith(("bert/", "cls/"))
    }


@pytest.fixture(scope="module")
def records(tmp_path_factory, monkeypatch_module_cwd):
    directory = tmp_path_factory.mktemp("records")
    return {phase: write_records(directory, phase) for phase in PHASES}


@pytest.fixture(scope="module")
def monkeypatch_module_cwd():
    from conftest import REPO_DIR

    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPO_DIR)
        yield


def test_phase_two_reads_longer_records_and_starts_from_phase_one(records, tmp_path):
    config = tiny_config(tmp_path / "bert_config.json", max_position_embeddings=64)
    for phase, (max_seq_length, max_predictions) in PHASES.items():
        example = tf.train.Example.FromString(
            next(iter(tf.data.TFRecordDataset(records[phase]))).numpy()
        )
        features = example.features.feature
        assert len(features["input_ids"].int64_list.value) == max_seq_length
        assert len(features["masked_lm_positions"].int64_list.value) == max_predictions

    run(**phase_flags(config, records[1], tmp_path / "phase1", 1))
    phase1 = tf.train.latest_checkpoint(str(tmp_path / "phase1"))
    assert phase1.endswith("model.ckpt-4")

    phase2_dir = tmp_path / "phase2"
    _, results = run(
        **phase_flags(
            config, records[2], phase2_dir, 2, init_checkpoint=phase1, learning_rate=1e-30,
            num_train_steps=2, num_warmup_steps=0,
        )
    )  # fmt: skip
    # The step starts again from 0, as the original's phase 2 (a new output dir, no global step read).
    assert results["global_step"] == 2
    assert tf.train.latest_checkpoint(str(phase2_dir)).endswith("model.ckpt-2")
    before, after = (
        _weights(str(tmp_path / "phase1" / "bert_model.ckpt")),
        _weights(str(phase2_dir / "bert_model.ckpt")),
    )
    assert sorted(before) == sorted(after)
    # A rate of 1e-30 (0 is refused) moves a weight by about 1e-30: phase one's weights, kept.
    for name, value in before.items():
        np.testing.assert_allclose(after[name], value, rtol=0, atol=1e-20, err_msg=name)


def test_phase_two_from_a_phase_one_too_short_for_it_is_one_line_naming_the_positions(
    records, tmp_path
):
    short = tiny_config(tmp_path / "short.json", max_position_embeddings=32)
    long = tiny_config(tmp_path / "long.json", max_position_embeddings=64)
    run(**phase_flags(short, records[1], tmp_path / "phase1", 1, num_train_steps=1, do_eval=False))
    phase1 = tf.train.latest_checkpoint(str(tmp_path / "phase1"))
    with pytest.raises(InputError) as error:
        run(**phase_flags(long, records[2], tmp_path / "phase2", 2, init_checkpoint=phase1))
    message = str(error.value)
    assert "\n" not in message
    assert "position_embeddings" in message and "max_position_embeddings=32" in message
    assert "64 positions" in message
    assert not (tmp_path / "phase2" / "model.ckpt-1.index").exists()
    # The phase 1 config with phase 2's length is refused on the flags alone.
    with pytest.raises(InputError, match="--max_seq_length=64 exceeds max_position_embeddings=32"):
        run(**phase_flags(short, records[2], tmp_path / "phase2b", 2, init_checkpoint=phase1))
