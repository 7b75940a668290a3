"""Early results: which provisional rows stage 2 emits, when a bucket's period is due, and
that the final rows stay those of the reference."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from jetspark.windowing import AggregateError, ops, session, sliding, tumbling
from jetspark.windowing.accumulate_by_frame import accumulate_events
from jetspark.windowing.combine_to_window import FINAL, output_schema_fields, step
from jetspark.windowing.early_results import EARLY_KEY, early_results_us, is_due
from jetspark.windowing.partials import schema_metadata
from jetspark.windowing.plan import Plan
from jetspark.windowing.reference import reference_windows
from jetspark.windowing.stateful import _Core

SEC = 1_000_000
TS = pa.timestamp("us", tz="UTC")


def _plan(window, period_us: int | None = 0, aggs=None) -> Plan:
    return Plan.build("k", "ts", window, aggs or {"n": ops.count(), "s": ops.sum_("x")},
                      early_results_us=period_us)


def _events(plan: Plan, keys, secs, xs=None) -> pa.Table:
    xs = xs if xs is not None else [1.0] * len(keys)
    ts = pa.array([round(s * SEC) for s in secs], pa.int64()).cast(TS)
    table = pa.table({"k": pa.array(keys), "ts": ts, "x": pa.array(xs, pa.float64())})
    return accumulate_events(plan, table)


def _rows(out: pa.Table) -> list[tuple]:
    """(key, start s, end s, n, final) sorted."""
    return sorted((r["k"], _s(r["window_start"]), _s(r["window_end"]), r["n"], r[FINAL])
                  for r in out.to_pylist())


def _us(ts) -> int:
    return pa.scalar(ts, TS).cast(pa.int64()).as_py()


def _s(ts) -> int:
    return _us(ts) // SEC


def test_the_period_is_a_duration_of_zero_or_more_and_a_bad_one_names_the_parameter() -> None:
    assert early_results_us(None) is None
    assert early_results_us("10 seconds") == 10 * SEC
    assert early_results_us(0) == 0 and early_results_us("0") == 0 and early_results_us("0 seconds") == 0
    assert early_results_us(500) == 500_000  # a number is milliseconds, as for windows
    for bad in ("soon", -5, True):
        with pytest.raises(AggregateError, match="early_results") as e:
            early_results_us(bad)
        assert "accepted" in str(e.value)
    assert is_due(10 * SEC, None, 0) and is_due(10 * SEC, 1_000, 11_000)
    assert not is_due(10 * SEC, 1_000, 10_999)


def test_without_early_results_there_is_no_final_column() -> None:
    plain = Plan.build("k", "ts", tumbling(10_000), {"n": ops.count()})
    assert FINAL not in dict(output_schema_fields(plain))
    assert dict(output_schema_fields(_plan(tumbling(10_000))))[FINAL] == "boolean"


def test_open_windows_with_new_events_are_provisional_and_a_quiet_key_is_not_emitted_again() -> None:
    plan = _plan(sliding(20_000, 10_000))
    r1 = step(plan, None, _events(plan, ["a", "a", "b"], [1, 12, 5]), None, 0, early_due=True)
    # every window holding an event is open at watermark 0: all provisional
    assert _rows(r1.output) == [("a", -10, 10, 1, False), ("a", 0, 20, 2, False), ("a", 10, 30, 1, False),
                                ("b", -10, 10, 1, False), ("b", 0, 20, 1, False)]
    assert r1.provisional_rows == 5
    # a new event of a at 15 s: only a's windows holding frame 1 (10–20 s) come again; b is quiet
    r2 = step(plan, r1.state, _events(plan, ["a"], [15]), 0, 0, early_due=True)
    assert _rows(r2.output) == [("a", 0, 20, 3, False), ("a", 10, 30, 2, False)]
    # nothing new: nothing emitted, whether due or not
    r3 = step(plan, r2.state, None, 0, 0, early_due=True)
    assert r3.output.num_rows == 0 and r3.provisional_rows == 0


def test_changes_wait_in_the_state_until_the_period_is_due() -> None:
    plan = _plan(tumbling(10_000), 10 * SEC)
    r1 = step(plan, None, _events(plan, ["a", "b"], [1, 2]), None, 0, early_due=False)
    assert r1.output.num_rows == 0
    r2 = step(plan, r1.state, _events(plan, ["a"], [3]), 0, 0, early_due=False)
    assert r2.output.num_rows == 0
    r3 = step(plan, r2.state, None, 0, 0, early_due=True)  # e.g. the bucket's event-time timer
    assert _rows(r3.output) == [("a", 0, 10, 2, False), ("b", 0, 10, 1, False)]


def test_a_window_ends_with_one_final_row_and_no_provisional_row_follows_it() -> None:
    plan = _plan(tumbling(10_000))
    r1 = step(plan, None, _events(plan, ["a", "a"], [1, 12]), None, 0, early_due=True)
    assert _rows(r1.output) == [("a", 0, 10, 1, False), ("a", 10, 20, 1, False)]
    # watermark 10 s closes [0, 10); a late event at 2 s and an on-time one at 15 s arrive
    r2 = step(plan, r1.state, _events(plan, ["a", "a"], [2, 15]), 0, 10 * SEC, early_due=True)
    assert _rows(r2.output) == [("a", 0, 10, 1, True), ("a", 10, 20, 2, False)]
    r3 = step(plan, r2.state, _events(plan, ["a"], [4]), 10 * SEC, 20 * SEC, early_due=True)
    assert _rows(r3.output) == [("a", 10, 20, 2, True)]


def test_the_clock_decides_per_bucket_and_the_last_emission_is_kept_in_the_blob() -> None:
    plan = _plan(tumbling(10_000), 10 * SEC)
    core = _Core(plan, _events(plan, ["a"], [1]).schema, {"k": pa.string()})
    res, blob, _ = core.run(None, None, _events(plan, ["a", "b"], [1, 2]), 0, now_ms=100_000)
    assert res.provisional_rows == 2 and schema_metadata(blob)[EARLY_KEY] == b"100000"
    res, blob, _ = core.run(blob, 0, _events(plan, ["a"], [3]), 0, now_ms=105_000)  # 5 s later
    assert res.output.num_rows == 0 and schema_metadata(blob)[EARLY_KEY] == b"100000"
    res, blob, _ = core.run(blob, 0, _events(plan, ["b"], [4]), 0, now_ms=110_000)  # a period later
    assert _rows(res.output) == [("a", 0, 10, 2, False), ("b", 0, 10, 2, False)]
    assert schema_metadata(blob)[EARLY_KEY] == b"110000"
    res, blob, _ = core.run(blob, 0, None, 10_000, now_ms=111_000)  # the event-time timer: final rows
    assert _rows(res.output) == [("a", 0, 10, 2, True), ("b", 0, 10, 2, True)] and blob is None


def test_provisional_sessions_are_keyed_by_their_start_and_a_merge_shows_the_merged_session() -> None:
    plan = _plan(session("5 seconds"))
    r1 = step(plan, None, _events(plan, ["a", "a"], [1, 20]), None, 0, early_due=True)
    assert _rows(r1.output) == [("a", 1, 6, 1, False), ("a", 20, 25, 1, False)]
    r2 = step(plan, r1.state, _events(plan, ["a"], [3]), 0, 0, early_due=True)  # grows at its end
    assert _rows(r2.output) == [("a", 1, 8, 2, False)]
    r3 = step(plan, r2.state, _events(plan, ["a"] * 3, [7, 11, 15]), 0, 0, early_due=True)  # bridges both
    assert _rows(r3.output) == [("a", 1, 25, 6, False)]
    r4 = step(plan, r3.state, None, 0, 26 * SEC, early_due=True)
    assert _rows(r4.output) == [("a", 1, 25, 6, True)]


@pytest.mark.parametrize("window", [sliding(30_000, 10_000), tumbling(10_000), session(4_000)],
                         ids=["sliding", "tumbling", "session"])
@pytest.mark.parametrize("seed", [1, 2])
def test_in_order_data_provisional_counts_never_exceed_the_final_which_equals_the_reference(window, seed):
    rng = np.random.default_rng(seed)
    plan = _plan(window, 3 * SEC)
    core = _Core(plan, _events(plan, ["a"], [1]).schema, {"k": pa.string()})
    blob = emitted = None
    rows, events, t, now = [], [], 0.0, 0

    def run(partials, wm_ms: int) -> None:
        nonlocal blob, emitted
        res, blob, _ = core.run(blob, emitted, partials, wm_ms, now)
        emitted = wm_ms
        if res is not None:
            rows.extend((r["k"], _us(r["window_start"]), _us(r["window_end"]), r["n"], r[FINAL])
                        for r in res.output.to_pylist())

    for _batch in range(30):
        n = int(rng.integers(0, 6))
        secs = list(t + np.cumsum(rng.uniform(0, 2, n)))  # in order
        keys = [f"k{i}" for i in rng.integers(0, 3, n)]
        events += [(k, round(s * SEC), {"x": 1.0}) for k, s in zip(keys, secs, strict=True)]
        now += int(rng.integers(500, 2500))
        # as in Spark, the watermark of a batch comes from the batches before it (here a lag of 1 s)
        run(_events(plan, keys, secs) if n else None, max(0, int((t - 1) * 1000)))
        t = secs[-1] if secs else t
    now += 1000
    run(None, int((t + 100) * 1000))  # every window closes

    final: dict[tuple, tuple[int, int]] = {}
    for i, (k, start, end, n, is_final) in enumerate(rows):
        if is_final:
            assert (k, start, end) not in final, "two final rows of one window"
            final[(k, start, end)] = (i, n)
    assert any(not r[4] for r in rows), "no provisional row at all"
    expected = reference_windows(events, window, {"n": ops.count()})
    assert {w: n for w, (_, n) in final.items()} == {w: r["n"] for w, r in expected.items()}
    for i, (k, start, end, n, is_final) in enumerate(rows):
        if not is_final:
            # its window's final row: the same start, or for a session the one that grew over it
            (j, final_n), = [v for (fk, fs, fe), v in final.items() if fk == k and (
                fs == start if not plan.is_session else fs <= start and end <= fe)]
            assert i < j, "a provisional row after its window's final row"
            assert n <= final_n, "a provisional count above the final count"


def test_a_key_or_aggregate_called_final_clashes_with_the_final_column() -> None:
    from pyspark.sql.types import StructType

    from jetspark.windowing.early_results import with_final_column

    assert with_final_column(StructType(), ["k", "n"]).fieldNames() == [FINAL]
    with pytest.raises(AggregateError, match=r"'final'.*rename it"):
        with_final_column(StructType(), ["k", "final"])
