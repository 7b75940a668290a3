"""The per-partition watermark tracker (docs/design.md, "Watermarks") with an injected clock,
and the late rule."""

from __future__ import annotations

import numpy as np
import pytest

from jetspark.datasources.watermarks import (
    PartitionMark,
    Progress,
    TrackerState,
    WatermarkPolicy,
    WatermarkTracker,
    late_mask,
)


class FakeClock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def make(lag=0, idle=10_000, advance=False):
    clock = FakeClock()
    return WatermarkTracker(WatermarkPolicy(lag, idle, advance), clock), clock


def test_min_over_partitions_minus_lag():
    tracker, _ = make(lag=5)
    state = tracker.initial(["a", "b"])
    state = tracker.advance(state, {"a": Progress(True, 100), "b": Progress(True, 60)})
    assert state.watermark == 55
    assert state.wm("a", 5) == 95 and state.wm("b", 5) == 55


def test_a_partition_without_data_holds_w_back_until_idle():
    tracker, clock = make(idle=10_000)
    state = tracker.initial(["a", "b"])
    state = tracker.advance(state, {"a": Progress(True, 100)})
    assert state.watermark is None
    clock.now += 9_999
    state = tracker.advance(state, {"a": Progress(True, 110)})
    assert state.watermark is None and not state.partitions["b"].idle
    clock.now += 1
    state = tracker.advance(state, {})
    assert state.partitions["b"].idle and not state.partitions["a"].idle
    assert state.watermark == 110


def test_idle_partition_rejoins_but_w_never_goes_back():
    tracker, clock = make(idle=1_000)
    state = tracker.advance(tracker.initial(["a", "b"]), {"a": Progress(True, 100), "b": Progress(True, 50)})
    assert state.watermark == 50
    clock.now += 1_000
    state = tracker.advance(state, {"a": Progress(True, 200)})
    assert state.partitions["b"].idle and state.watermark == 200
    state = tracker.advance(state, {"b": Progress(True, 70)})  # b rejoins, far behind
    assert not state.partitions["b"].idle
    assert state.watermark == 200  # max(previous W, min(200, 70))
    state = tracker.advance(state, {"a": Progress(True, 300), "b": Progress(True, 250)})
    assert state.watermark == 250


def test_all_idle_holds_by_default():
    tracker, clock = make(idle=1_000)
    state = tracker.advance(tracker.initial(["a"]), {"a": Progress(True, 100)})
    clock.now += 5_000
    state = tracker.advance(state, {})
    assert state.partitions["a"].idle and state.watermark == 100


def test_all_idle_advances_with_processing_time_when_asked():
    tracker, clock = make(lag=10, idle=1_000, advance=True)
    state = tracker.advance(tracker.initial(["a", "b"]), {"a": Progress(True, 100), "b": Progress(True, 90)})
    assert state.watermark == 80
    clock.now += 5_000
    state = tracker.advance(state, {})
    # each partition's event time extrapolated by the 5 s without progress; the smaller wins
    assert state.watermark == 90 + 5_000 - 10


def test_zero_idle_timeout_disables_idleness():
    tracker, clock = make(idle=0)
    state = tracker.advance(tracker.initial(["a", "b"]), {"a": Progress(True, 100)})
    clock.now += 10**9
    state = tracker.advance(state, {})
    assert not state.partitions["b"].idle and state.watermark is None


def test_new_partition_is_first_seen_now_and_holds_w():
    tracker, clock = make(idle=1_000)
    state = tracker.advance(tracker.initial(["a"]), {"a": Progress(True, 100)})
    clock.now += 500
    state = tracker.advance(state, {"a": Progress(True, 150), "c": Progress(False, None)})
    assert state.partitions["c"].progress_ms == clock.now
    assert state.watermark == 100  # c has no data yet: W holds


def test_state_json_round_trip():
    mark = PartitionMark(123, 456, True)
    assert PartitionMark.from_json(mark.to_json(lag_ms=3)) == mark
    assert mark.to_json(3)["wm"] == 120
    assert TrackerState({"a": mark}, 5).wm("a", 3) == 120


def test_policy_rejects_negative():
    with pytest.raises(ValueError):
        WatermarkPolicy(-1)


def test_late_mask_judges_against_the_coalesced_watermark_only():
    ts = np.array([100, 95, 89, 120, 111, 115])
    late, running = late_mask(ts, None, None)
    # out of order within the partition, but no W yet: nothing is late (Jet: on time until W)
    assert late.tolist() == [False] * 6
    assert running == 120
    late, running = late_mask(ts, 130, None)  # behind the partition's max 130, not behind W
    assert late.tolist() == [False] * 6 and running == 130
    late, _ = late_mask(ts, None, 112)  # Spark's watermark is already 112
    assert late.tolist() == [True, True, True, False, True, False]


def test_late_mask_empty_keeps_running():
    late, running = late_mask(np.array([], dtype=np.int64), 7, None)
    assert late.size == 0 and running == 7


def test_late_mask_ignored_records_neither_move_the_running_max_nor_are_late():
    # record 1 is beyond the batch's cut-off (watermark.maxFutureSkew): it counts for no max
    ts = np.array([100, 10_000, 101, 99, 105])
    late, running = late_mask(ts, None, None)
    assert not late.any() and running == 10_000
    ignored = np.array([False, True, False, False, False])
    late, running = late_mask(ts, None, 100, ignored)
    assert late.tolist() == [False, False, False, True, False] and running == 105
    # an ignored record is never late, even far below W
    late, running = late_mask(np.array([5, 200]), 150, 150, np.array([True, False]))
    assert late.tolist() == [False, False] and running == 200
    # a chunk of ignored records only keeps the running max it started with
    assert late_mask(np.array([9_999]), None, None, np.array([True]))[1] is None
    assert late_mask(np.array([9_999]), 42, None, np.array([True]))[1] == 42
