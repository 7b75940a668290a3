"""Laws of the watermark tracker and the late rule, checked with Hypothesis."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from jetspark.datasources.watermarks import Progress, WatermarkPolicy, WatermarkTracker, late_mask

KEYS = ["a", "b", "c"]

step = st.tuples(
    st.integers(0, 3_000),  # clock advance (ms)
    st.dictionaries(st.sampled_from(KEYS), st.tuples(st.booleans(), st.none() | st.integers(0, 10_000))),
)


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


@settings(max_examples=300, deadline=None)
@given(
    lag=st.integers(0, 500), idle=st.integers(0, 2_000), advance=st.booleans(),
    steps=st.lists(step, max_size=25),
)
def test_w_never_decreases_and_is_min_over_non_idle(lag, idle, advance, steps):
    clock = Clock()
    tracker = WatermarkTracker(WatermarkPolicy(lag, idle, advance), clock)
    state = tracker.initial(["a", "b"])
    previous = state.watermark
    for dt, news in steps:
        clock.now += dt
        progress = {k: Progress(adv, ts) for k, (adv, ts) in news.items()}
        state = tracker.advance(state, progress)
        if previous is not None:
            assert state.watermark is not None and state.watermark >= previous
        active = [m for m in state.partitions.values() if not m.idle]
        if active and all(m.max_ts is not None for m in active):
            candidate = min(m.max_ts - lag for m in active)
            expected = candidate if previous is None else max(previous, candidate)
            assert state.watermark == expected
        elif active:  # a non-idle partition without data holds W
            assert state.watermark == previous
        for m in state.partitions.values():
            assert m.idle == (idle > 0 and clock.now - m.progress_ms >= idle)
        previous = state.watermark


def reference_late(ts, start_max, w_prev):
    """Jet's rule: late only when behind the coalesced watermark the batch started with."""
    out, running = [], start_max
    for t in ts:
        out.append(w_prev is not None and t < w_prev)
        running = t if running is None else max(running, t)
    return out, running


@settings(max_examples=300, deadline=None)
@given(
    ts=st.lists(st.integers(0, 1_000), max_size=60), start_max=st.none() | st.integers(0, 1_000),
    w_prev=st.none() | st.integers(0, 1_000), cut=st.integers(0, 60),
)
def test_late_mask_matches_reference_and_chunks_compose(ts, start_max, w_prev, cut):
    expected, expected_running = reference_late(ts, start_max, w_prev)
    arr = np.array(ts, dtype=np.int64)
    whole, running = late_mask(arr, start_max, w_prev)
    assert whole.tolist() == expected
    if ts:
        assert running == expected_running
    first, mid = late_mask(arr[:cut], start_max, w_prev)
    second, _ = late_mask(arr[cut:], mid, w_prev)
    assert np.concatenate([first, second]).tolist() == expected
