"""The queue's watermark through the shared tracker: one partition, state in the offset."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from jetspark.datasources.rabbitmq.watermark import QueueWatermark, state_of
from jetspark.datasources.watermarks import WatermarkPolicy


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def test_first_batch_sets_max_watermark_and_late_records():
    wm = QueueWatermark("q", WatermarkPolicy(5, 60_000), clock=Clock())
    state, late = wm.advance(wm.initial(), np.array([10, 30, 24, 25]))
    assert late.tolist() == [False, False, False, False]  # out of order, but no W yet
    assert state["watermark"] == 25 and state["partitions"]["q"]["0"]["maxTs"] == 30


def test_watermark_holds_and_late_against_previous_w():
    wm = QueueWatermark("q", WatermarkPolicy(0, 60_000), clock=Clock())
    state, _ = wm.advance(wm.initial(), np.array([100]))
    state, late = wm.advance(json.loads(json.dumps(state)), np.array([50, 120]))
    assert late.tolist() == [True, False] and state["watermark"] == 120


def test_idle_queue_is_flagged_when_it_rejoins_after_the_timeout():
    """No message for the idle timeout (the injected clock): the queue is idle and W holds;
    one millisecond earlier it is not; a message makes it rejoin, not idle, and W moves."""
    clock = Clock()
    wm = QueueWatermark("q", WatermarkPolicy(0, 1_000), clock=clock)
    state, _ = wm.advance(wm.initial(), np.array([100]))
    assert state["partitions"]["q"]["0"]["idle"] is False and state["watermark"] == 100
    empty = np.array([], dtype=np.int64)
    clock.now += 999
    quiet, _ = wm.advance(json.loads(json.dumps(state)), empty)
    assert quiet["partitions"]["q"]["0"]["idle"] is False and quiet["watermark"] == 100
    clock.now += 1
    idle, late = wm.advance(json.loads(json.dumps(quiet)), empty)
    assert late.tolist() == []
    assert idle["partitions"]["q"]["0"]["idle"] is True and idle["watermark"] == 100
    assert idle["partitions"]["q"]["0"]["progressMs"] == state["partitions"]["q"]["0"]["progressMs"]
    clock.now += 5_000
    still, _ = wm.advance(json.loads(json.dumps(idle)), empty)
    assert still["partitions"]["q"]["0"]["idle"] is True and still["watermark"] == 100
    rejoined, _ = wm.advance(json.loads(json.dumps(still)), np.array([200]))
    assert rejoined["partitions"]["q"]["0"]["idle"] is False and rejoined["watermark"] == 200
    assert rejoined["partitions"]["q"]["0"]["progressMs"] == clock.now


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, 1_000), max_size=10), max_size=6), st.integers(0, 50))
def test_watermark_never_decreases_and_late_matches_a_loop(batches, lag):
    wm = QueueWatermark("q", WatermarkPolicy(lag, 60_000), clock=Clock())
    state = wm.initial()
    for ts in batches:
        w_prev = state["watermark"]
        state2, late = wm.advance(state, np.array(ts, dtype=np.int64))
        for t, is_late in zip(ts, late.tolist(), strict=True):
            assert is_late == (w_prev is not None and t < w_prev)
        if w_prev is not None:
            assert state2["watermark"] >= w_prev
        state = state2


def test_offsets_written_before_the_shared_shape_are_read():
    """An offset of a checkpoint from before both sources shared one offset shape (the state
    nested under "watermark") gives the same state, so such a query resumes where it was."""
    wm = QueueWatermark("q", WatermarkPolicy(0, 60_000), clock=Clock())
    state, _ = wm.advance(wm.initial(), np.array([100, 150]))
    old = {"seq": 2, "watermark": {"watermark": state["watermark"],
                                   "partitions": {"queue": state["partitions"]["q"]["0"]}}}
    assert state_of(old, "q") == state_of(state, "q")
    assert state_of(old, "q").watermark == 150
