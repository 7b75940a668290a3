"""Window definitions, frame arithmetic, stage 2 bookkeeping and a user-defined operation."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest

from jetspark.errors import JetsparkError
from jetspark.windowing import (
    AggregateError,
    AggregateOperation,
    Field,
    WindowDefinitionError,
    ops,
    session,
    sliding,
    tumbling,
)
from jetspark.windowing.accumulate_by_frame import accumulate_events, stage1_function
from jetspark.windowing.combine_to_window import step
from jetspark.windowing.plan import Plan
from jetspark.windowing.policy import SlidingWindowPolicy

SEC = 1_000_000


def test_window_definitions() -> None:
    w = sliding("30 seconds", "10 seconds")
    assert (w.size_us, w.slide_us, w.frames_per_window) == (30 * SEC, 10 * SEC, 3)
    assert tumbling("1 minute") == sliding(60_000, dt.timedelta(minutes=1))
    assert session("5s").timeout_us == 5 * SEC


@pytest.mark.parametrize(
    "make",
    [
        lambda: sliding("30 seconds", "7 seconds"),
        lambda: sliding("0 seconds", "1 second"),
        lambda: tumbling(-5),
        lambda: session("soon"),
        lambda: sliding(True, 1),
    ],
)
def test_bad_window_definitions_raise(make) -> None:
    with pytest.raises(WindowDefinitionError) as e:
        make()
    assert isinstance(e.value, JetsparkError)


def test_a_size_that_is_no_multiple_of_the_slide_is_refused_in_the_users_units() -> None:
    with pytest.raises(WindowDefinitionError) as e:
        sliding("25 seconds", "10 seconds")
    assert str(e.value) == (
        "window size 25 seconds must be a whole multiple of the slide 10 seconds: frames are one slide "
        "long (Jet's sliding window policy). Use a size of 20 seconds or 30 seconds, or a slide of 5 seconds")
    with pytest.raises(WindowDefinitionError, match="size of 1 hour or 2 hours, or a slide of 30 minutes"):
        sliding("90 minutes", "1 hour")


def test_frame_arithmetic_matches_spark_window_alignment() -> None:
    p = SlidingWindowPolicy.of(sliding("30 seconds", "10 seconds"))
    t = np.array([-1, 0, 9_999_999, 10 * SEC])
    assert p.frame_of(t).tolist() == [-1, 0, 0, 1]
    j = np.array([0])
    assert (p.window_start(j)[0], p.window_end(j)[0]) == (-20 * SEC, 10 * SEC)
    assert p.last_closed_window(10 * SEC) == 0  # window ending at 10 s closes at W = 10 s
    assert p.first_open_window(10 * SEC) == 1
    assert p.first_needed_frame(30 * SEC) == 1  # frame 0's last window ends at 30 s
    assert p.next_window_end(np.array([5]), 10 * SEC) == 60 * SEC


class SumOfSquares(AggregateOperation):
    """The docstring example of a user-defined operation."""

    fields = (Field("s", "float64"),)
    result_type = "double"

    def accumulate(self, acc, groups, x):
        return (acc[0] + np.bincount(groups, x * x, minlength=len(acc[0])),)

    def combine(self, a, b):
        return (a[0] + b[0],)

    def finish(self, acc):
        return acc[0]


def _table(keys, secs, xs) -> pa.Table:
    return pa.table(
        {
            "k": pa.array(keys),
            "ts": pa.array([s * SEC for s in secs], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "x": pa.array(xs, pa.float64()),
        }
    )


def test_user_defined_operation_without_deduct() -> None:
    plan = Plan.build("k", "ts", sliding(20_000, 10_000), {"ss": SumOfSquares("x"), "n": ops.count()})
    table = _table(["a", "a", "a", "b"], [1, 12, 25, 3], [1.0, 2.0, 3.0, 4.0])
    out = step(plan, None, accumulate_events(plan, table), None, None).output.to_pylist()
    got = {(r["k"], r["window_start"].second): (r["ss"], r["n"]) for r in out}
    assert got == {
        ("a", 50): (1.0, 1),  # [-10 s, 10 s) relative to the epoch minute
        ("a", 0): (5.0, 2),
        ("a", 10): (13.0, 2),
        ("a", 20): (9.0, 1),
        ("b", 50): (16.0, 1),
        ("b", 0): (16.0, 1),
    }


def test_streaming_step_emits_once_and_evicts() -> None:
    plan = Plan.build("k", "ts", sliding(20_000, 10_000), {"n": ops.count()})
    r1 = step(plan, None, accumulate_events(plan, _table(["a"] * 3, [1, 12, 25], [0, 0, 0])), None, 0)
    assert r1.output.num_rows == 0 and r1.state.num_rows == 3
    assert r1.next_close_us == 10 * SEC
    r2 = step(plan, r1.state, None, 0, 20 * SEC)  # windows ending at 10 s and 20 s
    assert [r["n"] for r in r2.output.to_pylist()] == [1, 2]
    assert r2.state.num_rows == 2  # frame 0 is no longer needed
    r3 = step(plan, r2.state, None, 20 * SEC, 20 * SEC)  # same watermark: nothing again
    assert r3.output.num_rows == 0
    r4 = step(plan, r3.state, None, 20 * SEC, 100 * SEC)
    assert [r["n"] for r in r4.output.to_pylist()] == [2, 1]
    assert r4.state.num_rows == 0 and r4.next_close_us is None


def test_stage1_function_carries_watermark_and_drops_heartbeats() -> None:
    plan = Plan.build("k", "ts", tumbling(10_000), {"n": ops.count()})
    wm = pa.array([5 * SEC, 7 * SEC, 9 * SEC], pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    batch = pa.RecordBatch.from_pydict(
        {
            "k": ["a", "a", None],
            "ts": pa.array([1 * SEC, 2 * SEC, None], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "watermark": wm,
            "heartbeat": [False, None, True],
        }
    )
    out = pa.Table.from_batches(list(stage1_function(plan, "watermark", "heartbeat")(iter([batch]))))
    assert out.column("__s0_count").to_pylist() == [2]
    assert out.column("__wm").cast(pa.int64()).to_pylist() == [9 * SEC]
    only_hb = batch.filter(pa.array([False, False, True]))
    carrier = list(stage1_function(plan, "watermark", "heartbeat", out.schema)(iter([only_hb])))
    assert carrier[0].num_rows == 1 and carrier[0].column("__frame").null_count == 1


def test_plan_rejects_bad_aggregates() -> None:
    with pytest.raises(AggregateError):
        Plan.build("k", "ts", tumbling(1000), {})
    with pytest.raises(AggregateError):
        Plan.build("k", "ts", tumbling(1000), {"n": len})
    with pytest.raises(AggregateError):
        Field("f", "decimal")


def test_session_touching_the_watermark_stays_open_and_merges() -> None:
    """A session ending exactly at the watermark can still be extended by an on-time event."""
    plan = Plan.build("k", "ts", session("1 second"), {"n": ops.count()})
    r1 = step(plan, None, accumulate_events(plan, _table(["b"], [99], [0.0])), None, 0)
    assert r1.next_close_us == 100 * SEC + 1  # closes only once the watermark passes 100 s
    r2 = step(plan, r1.state, accumulate_events(plan, _table(["b"], [100], [0.0])), 0, 100 * SEC)
    assert r2.output.num_rows == 0
    r3 = step(plan, r2.state, None, 100 * SEC, 102 * SEC)
    out = r3.output.to_pylist()
    assert [(r["window_start"].second, r["window_end"].second, r["n"]) for r in out] == [(39, 41, 2)]


@pytest.mark.parametrize("window", [sliding(20_000, 10_000), session(5_000)])
def test_stage1_leaves_rows_with_a_null_event_time_out_and_keeps_their_watermark(window) -> None:
    """As Spark's window()/session_window(): a row without an event time is in no window
    (it used to fail the query); its watermark column still counts."""
    plan = Plan.build("k", "ts", window, {"n": ops.count(), "s": ops.sum_("x")})
    ts = pa.timestamp("us", tz="UTC")
    rows = {
        "k": ["a", "a", "b", "a"],
        "ts": pa.array([1 * SEC, None, 3 * SEC, 12 * SEC], pa.int64()).cast(ts),
        "x": [1.0, 100.0, 2.0, 4.0],
        "watermark": pa.array([1 * SEC, 30 * SEC, 2 * SEC, 3 * SEC], pa.int64()).cast(ts),
    }
    table = pa.table(rows)
    valid = table.filter(pa.array([True, False, True, True]))
    assert accumulate_events(plan, table).equals(accumulate_events(plan, valid))
    out = pa.Table.from_batches(list(stage1_function(plan, "watermark")(iter(table.to_batches()))))
    assert sum(out.column("__s0_count").to_pylist()) == 3
    assert sum(out.column("__a1_s").to_pylist()) == 7.0
    assert out.column("__wm").cast(pa.int64()).to_pylist()[0] == 30 * SEC


def _run_steps(plan: Plan, batches: list[pa.Table], marks: list[int], carried: bool) -> list[tuple]:
    """Steps over micro-batches as a bucket sees them: batch i at Spark's watermark
    marks[i], carrying marks[i + 1] (its own W) when ``carried``; then a last timer step.
    Returns (batch, window row) per emitted row."""
    state, emitted, out = None, None, []
    for i, events in enumerate([*batches, None]):
        wm = marks[min(i, len(marks) - 1)]
        partials = None if events is None else accumulate_events(plan, events)
        nxt = marks[i + 1] if carried and events is not None else None
        res = step(plan, state, partials, emitted, wm, carried_us=nxt)
        if res is None:
            continue
        out += [(i, tuple(sorted(r.items()))) for r in res.output.to_pylist()]
        state = res.state
        emitted = res.emitted_us
    return out


@pytest.mark.parametrize("window", [sliding(20_000, 10_000), tumbling(10_000), session("3 seconds")],
                         ids=["sliding", "tumbling", "session"])
@pytest.mark.parametrize("seed", range(6))
def test_the_carried_watermark_emits_the_same_windows_no_later(window, seed) -> None:
    """With the watermark its micro-batch reached carried along (the sources' W, Spark's
    only at the next micro-batch), a window is emitted by the micro-batch that closes it,
    holding the same rows as when Spark's watermark closes it one micro-batch later."""
    rng = np.random.default_rng(seed)
    plan = Plan.build("k", "ts", window, {"n": ops.count(), "s": ops.sum_("x")})
    batches, marks, t = [], [0], 0
    for _ in range(8):
        # on time: at or after the batch's starting W, as the sources deliver them
        secs = np.maximum(t + rng.integers(-6, 8, 12), -(-marks[-1] // SEC)).tolist()
        batches.append(_table(rng.choice(["a", "b", "c"], 12).tolist(), secs, rng.random(12).tolist()))
        t += int(rng.integers(0, 9))
        marks.append(max(marks[-1], (t - 2) * SEC))
    marks.append(10_000 * SEC)  # the last step closes everything
    spark = _run_steps(plan, batches, marks, carried=False)
    ours = _run_steps(plan, batches, marks, carried=True)
    assert sorted(r for _, r in ours) == sorted(r for _, r in spark)
    when = {r: b for b, r in spark}
    assert all(b <= when[r] for b, r in ours)
    assert any(b < when[r] for b, r in ours)


def _sliding_rows(rows: list[tuple], aggs: dict, *, use_deduct: bool = True) -> dict:
    """(key, second, x[, y]) rows through stages 1 and 2 of a 30 s window sliding by 10 s."""
    plan = Plan.build("k", "ts", sliding("30 seconds", "10 seconds"), aggs, use_deduct=use_deduct)
    table = pa.table({"k": [r[0] for r in rows],
                      "ts": pa.array([r[1] * 1_000_000 for r in rows], pa.timestamp("us", tz="UTC")),
                      "x": [float(r[2]) for r in rows], "y": [float(r[-1]) for r in rows]})
    out = step(plan, None, accumulate_events(plan, table), None, None).output.to_pylist()
    return {(r["k"], r["window_start"].second): r for r in out}


@pytest.mark.parametrize("big", [1e17, 1e12, float("inf")])
def test_a_large_value_of_one_key_leaves_another_keys_sliding_sums_exact(big) -> None:
    # one running sum over all keys' frames gave key b 0.0 after a's 1e17, NaN after a's inf
    got = _sliding_rows([("a", 0, big), ("b", 1, 1), ("b", 12, 2), ("b", 15, 4), ("b", 25, 5)],
                        {"s": ops.sum_("x"), "m": ops.mean("x")})
    # windows start at -20 s (second 40), -10 s, 0, 10 and 20 s
    assert [got[("b", s)]["s"] for s in (40, 50, 0, 10, 20)] == [1.0, 7.0, 12.0, 11.0, 5.0]
    assert got[("b", 0)]["m"] == 3.0


def test_variance_and_slope_are_exact_again_once_an_outlier_left_the_window() -> None:
    rows = [("b", 0, 1e9, 1), ("b", 12, 1, 2), ("b", 15, 2, 4), ("b", 25, 3, 6.5), ("b", 26, 5, 10),
            ("b", 35, 4, 8)]
    aggs = {"v": ops.variance("x"), "slope": ops.regr_slope("y", "x")}
    for use_deduct in (True, False):
        got = _sliding_rows(rows, aggs, use_deduct=use_deduct)[("b", 10)]  # [10 s, 40 s): no 1e9
        assert got["v"] == pytest.approx(np.var([1, 2, 3, 5, 4], ddof=1), rel=1e-12)
        assert got["slope"] == pytest.approx(np.polyfit([1, 2, 3, 5, 4], [2, 4, 6.5, 10, 8], 1)[0], rel=1e-9)


def test_key_codes_group_as_spark_does_for_floats_structs_and_lists() -> None:
    from jetspark.windowing.keys import key_codes

    table = pa.table({
        "f": pa.array([0.0, -0.0, 1.0, None, float("nan"), float("nan")]),
        "s": pa.array([{"a": 1, "b": "x"}, {"a": 1, "b": "x"}, None, {"a": None, "b": None},
                       {"a": 2, "b": "y"}, None]),
        "l": pa.array([[1, 2], [1, 2], [], None, [2], [1, 2]]),
    })
    assert key_codes(table, ("f",)).tolist() == [0, 0, 1, 2, 3, 3]  # -0.0 is 0.0; NaN is one key
    other_nan = pa.array(-np.array([np.nan]))  # another NaN bit pattern (the sign)
    nans = pa.table({"f": pa.concat_arrays([pa.array([float("nan")]), other_nan])})
    assert key_codes(nans, ("f",)).tolist() == [0, 0]
    nested = pa.table({"l": pa.array([[0.0], [-0.0], [float("nan")], [float("nan")]])})
    assert key_codes(nested, ("l",)).tolist() == [0, 0, 1, 1]
    # a null struct whose hidden fields differ is still one null key
    masked = pa.StructArray.from_arrays([pa.array([1, 2, 1])], names=["a"],
                                        mask=pa.array([True, True, False]))
    assert key_codes(pa.table({"s": masked}), ("s",)).tolist() == [0, 0, 1]
    assert key_codes(table, ("s",)).tolist() == [0, 0, 1, 2, 3, 1]  # a null struct is not {null, null}
    assert key_codes(table, ("l",)).tolist() == [0, 0, 1, 2, 3, 0]
    assert key_codes(table, ("f", "s", "l")).tolist() == [0, 0, 1, 2, 3, 4]


def test_a_window_shows_the_key_zero_for_minus_zero() -> None:
    plan = Plan.build("k", "ts", tumbling("10 seconds"), {"n": ops.count()})
    table = pa.table({"k": [-0.0, 0.0], "ts": pa.array([1, 2], pa.timestamp("us", tz="UTC"))})
    out = step(plan, None, accumulate_events(plan, table), None, None).output.to_pylist()
    assert len(out) == 1 and out[0]["n"] == 2 and str(out[0]["k"]) == "0.0"
