"""ProgressLog: a line at the first item, then every `every` items or 30 s, with rate and ETA."""

import logging

import pytest

from bert_tf.progress_log import ProgressLog, format_seconds


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_lines_come_at_the_first_item_every_n_items_and_every_30_seconds():
    clock = _Clock()
    progress = ProgressLog("features written", total=1000, every=100, unit="examples", clock=clock)
    logged = []
    for item in range(1, 1001):
        clock.now += 0.5 if item <= 200 else 0.1  # 60 items in 30 s, then 300
        if progress.add():
            logged.append(item)
    # The first item; 30 s then pass before item 100; then every 100 items (10 s each).
    assert logged[:3] == [1, 61, 100] and logged[-3:] == [800, 900, 1000]
    assert progress.finish() is None  # the last item's line was logged


def test_the_line_shows_count_total_rate_and_eta(caplog):
    clock = _Clock()
    progress = ProgressLog("eval batch", total=10, every=4, unit="examples", clock=clock)
    with caplog.at_level(logging.INFO, logger="absl"), caplog.at_level(logging.INFO):
        clock.now = 2.0
        line = progress.add(1, units=32)
    assert line == "eval batch 1/10  16.0 examples/s  ETA 0:00:18"
    assert line in [r.getMessage() for r in caplog.records]


def test_an_unknown_total_gives_count_and_rate_without_eta():
    clock = _Clock()
    progress = ProgressLog("records", clock=clock)
    clock.now = 4.0
    assert progress.add(8) == "records 8  2.0 items/s"
    clock.now = 5.0
    progress.add(2)
    assert progress.finish() == "records 10  2.0 items/s"


@pytest.mark.parametrize(
    "seconds, text", [(0, "0:00:00"), (59.9, "0:00:59"), (3725, "1:02:05"), (float("inf"), "?")]
)
def test_format_seconds(seconds, text):
    assert format_seconds(seconds) == text


def test_feature_writing_logs_its_count_and_rate_every_30_seconds(tmp_path, monkeypatch, caplog):
    import types

    from bert_tf.data.feature_cache import write_records

    clock = _Clock()
    monkeypatch.setattr("bert_tf.progress_log.time", types.SimpleNamespace(monotonic=clock))

    def examples():
        for _ in range(100):
            clock.now += 1.0  # a second a feature
            yield b"x"

    with caplog.at_level(logging.INFO, logger="absl"), caplog.at_level(logging.INFO):
        assert write_records(str(tmp_path / "train.tf_record"), examples()) == 100
    lines = [
        r.getMessage() for r in caplog.records if r.getMessage().startswith("features written")
    ]
    assert [line.split()[4] for line in lines] == ["30", "60", "90", "100"]
    assert lines[0].endswith(" 1.0 features/s")
