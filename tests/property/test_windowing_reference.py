"""Stage 1 + stage 2 (pure, no Spark) equal a naive reference that keeps every event."""

from __future__ import annotations

import datetime as dt
import itertools
import math

import numpy as np
import pyarrow as pa
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jetspark.windowing import ops, session, sliding
from jetspark.windowing.accumulate_by_frame import accumulate_events, merge_partials
from jetspark.windowing.combine_to_window import merge, step
from jetspark.windowing.plan import FRAME, Plan
from jetspark.windowing.reference import reference_windows
from jetspark.windowing.sliding_scan import sliding_windows

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
SEC = 1_000_000
AGGS = {
    "n": ops.count(),
    "nx": ops.count("x"),
    "s": ops.sum_("x"),
    "m": ops.mean("x"),
    "lo": ops.min_("x"),
    "hi": ops.max_("x"),
    "var": ops.variance("x"),
    "sd": ops.stddev("x"),
    "slope": ops.linear_trend("x", "y"),
    "icpt": ops.regr_intercept("y", "x"),
    "seq": ops.collect_sorted("x"),
}

windows = st.one_of(
    st.builds(lambda slide, k: sliding(slide * k * 1000, slide * 1000), st.integers(1, 7), st.integers(1, 6)),
    st.builds(lambda t: session(t * 1000), st.integers(1, 9)),
)
events = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c", None]),
        st.integers(0, 120),  # seconds
        st.one_of(st.none(), st.integers(-50, 50)),
        st.integers(-20, 20),
    ),
    min_size=1,
    max_size=60,
)


def _table(evs) -> pa.Table:
    return pa.table(
        {
            "k": pa.array([e[0] for e in evs], pa.string()),
            "ts": pa.array([e[1] * SEC for e in evs], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "x": pa.array([e[2] for e in evs], pa.float64()),
            "y": pa.array([float(e[3]) for e in evs], pa.float64()),
        }
    )


def _ref_events(evs):
    return [(e[0], e[1] * SEC, {"x": e[2], "y": float(e[3])}) for e in evs]


def _us(d: dt.datetime) -> int:
    return (d - EPOCH) // dt.timedelta(microseconds=1)


def _rows(table: pa.Table) -> dict:
    out = {}
    for r in table.to_pylist():
        w = (r.pop("k"), _us(r.pop("window_start")), _us(r.pop("window_end")))
        assert w not in out, f"window emitted twice: {w}"
        out[w] = r
    return out


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return math.isclose(a, b, rel_tol=1e-7, abs_tol=1e-6)


def assert_matches(got: dict, expected: dict) -> None:
    assert set(got) == set(expected)
    for w, res in expected.items():
        for name, value in res.items():
            assert _close(got[w][name], value), (w, name, got[w][name], value)


def _stage1(plan: Plan, evs, parts: int) -> pa.Table:
    """Split the events over ``parts`` input partitions, accumulate each, as Spark would."""
    table = _table(evs)
    cuts = np.linspace(0, len(evs), parts + 1).astype(int)
    partials = [accumulate_events(plan, table.slice(a, b - a)) for a, b in itertools.pairwise(cuts) if b > a]
    return pa.concat_tables(partials)


@settings(max_examples=80, deadline=None)
@given(evs=events, window=windows, parts=st.integers(1, 3), deduct=st.booleans())
def test_static_equals_reference(evs, window, parts, deduct) -> None:
    plan = Plan.build("k", "ts", window, AGGS, use_deduct=deduct)
    res = step(plan, None, _stage1(plan, evs, parts), None, None)
    assert_matches(_rows(res.output), reference_windows(_ref_events(evs), window, AGGS))


def _stream(plan: Plan, batches, lag_s: int):
    """Feed batches through stage 2 like the streaming operator does; returns outputs + states.

    The watermark of batch i is max event time so far - lag (as a source computes it);
    Spark applies it from the next batch on. Events older than it are dropped (late).
    """
    state, emitted, wm, outputs, kept, sizes = None, None, None, [], [], []
    for evs in batches:
        live = [e for e in evs if wm is None or e[1] * SEC >= wm]
        kept.extend(live)
        partials = merge_partials(plan, _stage1(plan, live, 2)) if live else None
        current = wm if wm is not None else 0
        res = step(plan, state, partials, emitted, current)
        if res is not None:
            outputs.append(res.output)
            state, emitted = res.state, current
            sizes.append(state.num_rows)
        if evs:
            top = max(e[1] for e in evs) * SEC - lag_s * SEC
            wm = top if wm is None else max(wm, top)
    # one more trigger: Spark runs a no-data batch once the watermark moved
    res = step(plan, state, None, emitted, wm)
    if res is not None:
        outputs.append(res.output)
    return outputs, kept, wm, sizes


@settings(max_examples=80, deadline=None)
@given(
    batches=st.lists(events, min_size=1, max_size=5),
    window=windows,
    lag=st.integers(0, 20),
    deduct=st.booleans(),
)
def test_streaming_emits_each_closed_window_once(batches, window, lag, deduct) -> None:
    plan = Plan.build("k", "ts", window, AGGS, use_deduct=deduct)
    outputs, kept, wm, _ = _stream(plan, batches, lag)
    got = _rows(pa.concat_tables(outputs))
    ref = reference_windows(_ref_events(kept), window, AGGS)
    # a sliding window closes at watermark >= end; a session only at watermark > end (an
    # on-time event at t == end would still extend it)
    expected = {w: r for w, r in ref.items() if (w[2] < wm if plan.is_session else w[2] <= wm)}
    assert_matches(got, expected)


@settings(max_examples=40, deadline=None)
@given(evs=events, window=windows)
def test_with_and_without_deduct_agree(evs, window) -> None:
    a = step(Plan.build("k", "ts", window, AGGS, use_deduct=True), None, None, None, None)
    assert a is None
    p1 = Plan.build("k", "ts", window, AGGS, use_deduct=True)
    p2 = Plan.build("k", "ts", window, AGGS, use_deduct=False)
    r1 = _rows(step(p1, None, _stage1(p1, evs, 2), None, None).output)
    r2 = _rows(step(p2, None, _stage1(p2, evs, 2), None, None).output)
    assert_matches(r1, {w: {k: v for k, v in r.items()} for w, r in r2.items()})


def _windows_by_layout(plan: Plan, cells, layout: str, jlo, jhi) -> dict:
    k = plan.window.frames_per_window
    frames = cells.pos[FRAME]
    wins = sliding_windows(plan.ops, cells.accs, cells.kc, frames, k, jlo, jhi, plan.use_deduct, layout)
    keys = cells.keys.column("k").take(pa.array(wins.cell)).to_pylist()
    results = {name: col.to_pylist() for name, col in plan.results_to_columns(wins.accs).items()}
    out = {}
    for i, w in enumerate(zip(keys, wins.last_frame.tolist(), strict=True)):
        assert w not in out, f"window emitted twice: {w}"
        out[w] = {name: col[i] for name, col in results.items()}
    return out


@settings(max_examples=60, deadline=None)
@given(
    evs=events,
    slide=st.integers(1, 7),
    k=st.integers(2, 6),
    bounds=st.tuples(st.none() | st.integers(-5, 130), st.none() | st.integers(-5, 130)),
    deduct=st.booleans(),
)
# deducting x=7 from {7, 0, 0} left rounding noise in cxx: a slope of 0.0 instead of null
@example(evs=[("a", 0, 7, 0), ("a", 2, 0, 0), ("a", 2, 0, 0)], slide=1, k=2, bounds=(None, None), deduct=True)
def test_dense_and_segment_layouts_give_the_same_windows(evs, slide, k, bounds, deduct) -> None:
    plan = Plan.build("k", "ts", sliding(slide * k * 1000, slide * 1000), AGGS, use_deduct=deduct)
    cells = merge(plan, _stage1(plan, evs, 2))
    jlo, jhi = bounds
    dense = _windows_by_layout(plan, cells, "dense", jlo, jhi)
    assert_matches(dense, _windows_by_layout(plan, cells, "segments", jlo, jhi))


def test_state_stays_bounded_over_a_long_stream() -> None:
    """Retained frames depend on the window size and the lag, not on the stream length."""
    rng = np.random.default_rng(7)
    window = sliding(30_000, 10_000)  # 3 frames per window
    plan = Plan.build("k", "ts", window, {"n": ops.count(), "s": ops.sum_("x")})
    batches = []
    for b in range(300):
        t = b * 5 + rng.integers(0, 5, 40)
        batches.append([(f"k{rng.integers(0, 20)}", int(s), int(rng.integers(0, 9)), 0) for s in t])
    _, _, _, sizes = _stream(plan, batches, 2)
    # at most 20 keys x (3 frames per window + frames ahead of the watermark)
    assert max(sizes) <= 20 * 5
    assert max(sizes[-100:]) <= max(sizes[:100]) + 20
