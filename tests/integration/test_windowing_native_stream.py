"""Streaming tumbling windows on Spark's own streaming aggregation (``engine="native"``) against
the Python engine (``engine="python"``): the same windows, emitted in the same micro-batch,
on the same input — NaN, null event times and their metric, heartbeats, several micro-batches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pyspark.sql import functions as F

from jetspark.windowing import (
    NULL_TIME_METRIC,
    AggregateError,
    ops,
    session,
    sliding,
    tumbling,
    window_aggregate,
)
from jetspark.windowing.reference import reference_windows
from tests.integration.test_windowing_spark import (
    AGGS,
    BASE_US,
    SEC,
    _events_with_times,
    _with_null_times,
    assert_same,
    heartbeat,
    make_batches,
    rows_by_window,
    write_batch,
)

pytestmark = pytest.mark.integration

WINDOW = tumbling("15 seconds")


def _run(spark, folder: Path, ckpt: Path, engine: str, window=WINDOW, aggs=AGGS, state_api=None):
    """Runs the query over every file (one per micro-batch): ({batch id: rows}, progress, plan)."""
    schema = spark.read.parquet(str(folder)).schema
    src = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(folder))
           .withWatermark("watermark", "0 seconds"))  # fmt: skip
    out = window_aggregate(src, key="k", time="ts", window=window, aggs=aggs, engine=engine,
                           state_api=state_api)
    emitted: dict[int, list] = {}

    def collect(batch, batch_id):
        emitted[batch_id] = batch.collect()

    q = out.writeStream.foreachBatch(collect).option("checkpointLocation", str(ckpt)).start()
    try:
        q.processAllAvailable()
        progress, plan = q.recentProgress, q._jsq.explainInternal(False)
    finally:
        q.stop()
    return emitted, progress, plan


def _batch_of(emitted: dict[int, list]) -> dict[tuple, int]:
    """The micro-batch that emitted each window."""
    return {w: b for b, rows in emitted.items() for w in rows_by_window(rows)}


def test_streaming_tumbling_native_engine_equals_python_engine(spark, tmp_path):
    """NaN left in ``x`` (null for both engines), null event times (in no window, counted
    per micro-batch), a heartbeat mid-stream and one at the end: the same windows with the
    same values, and the native query runs no Python. The Python engine emits a window by
    the micro-batch whose own W closes it, Spark's aggregation one micro-batch later, when
    Spark's watermark has caught up (docs/explanation/windows.md)."""
    folder = tmp_path / "in"
    folder.mkdir()
    batches, nulls = _with_null_times(make_batches(seed=23, batches=4, rows=150), seed=4)
    assert any(np.isnan(x) for b in batches for x in b["x"])
    last = max(t for b in batches for t in b["ts"] if t is not None)
    batches.insert(2, heartbeat(int(batches[1]["watermark"][0]) + 20 * SEC))  # moves W with no events
    batches.append(heartbeat(last + 60 * SEC))  # closes every window
    for i, b in enumerate(batches):
        write_batch(folder, i, b)

    native, native_prog, native_plan = _run(spark, folder, tmp_path / "ck_native", "native")
    python, python_prog, python_plan = _run(spark, folder, tmp_path / "ck_python", "python")

    assert "InPandasWithState" not in native_plan and "MapInArrow" not in native_plan, native_plan
    assert "StateStoreSave" in native_plan and "FlatMapGroupsInPandasWithState" in python_plan
    native_at, python_at = _batch_of(native), _batch_of(python)
    assert native_at.keys() == python_at.keys() and len(set(native_at.values())) >= 3
    assert all(python_at[w] <= native_at[w] for w in native_at)
    assert any(python_at[w] < native_at[w] for w in native_at)
    ours = rows_by_window(r for rows in native.values() for r in rows)
    assert_same(ours, rows_by_window(r for rows in python.values() for r in rows))
    assert_same(ours, reference_windows(_events_with_times(batches), WINDOW, AGGS))

    def metric(prog):
        return [(p["batchId"], p["observedMetrics"][NULL_TIME_METRIC]["rows"])
                for p in prog if p["numInputRows"]]  # fmt: skip

    assert metric(native_prog) == metric(python_prog)
    assert sum(n for _, n in metric(native_prog)) == nulls > 0


SLIDING = sliding("30 seconds", "10 seconds")
POP_AGGS = {**AGGS, "vp": ops.var_pop("x"), "sdp": ops.stddev_pop("x"), "nx": ops.count("x")}


def test_streaming_sliding_native_engine_equals_python_engine(spark, tmp_path):
    """Sliding windows as two chained Spark streaming aggregations (frames, then windows):
    over several micro-batches, with NaN, null event times, rows behind the current
    micro-batch's watermark and a heartbeat, the same windows and values as the Python
    engine and the naive reference; no Python worker in the plan, two state stores. Each
    window comes no sooner than on the Python engine (Spark's watermark is one micro-batch
    behind the W the rows carry)."""
    folder = tmp_path / "in"
    folder.mkdir()
    batches, nulls = _with_null_times(make_batches(seed=31, batches=4, rows=120), seed=5)
    last = max(t for b in batches for t in b["ts"] if t is not None)
    # moves W with no events, as far as the next batch's oldest row (which stays on time)
    batches.insert(2, heartbeat(min(t for t in batches[2]["ts"] if t is not None)))
    batches.append(heartbeat(last + 60 * SEC))
    for i, b in enumerate(batches):
        write_batch(folder, i, b)

    native, native_prog, native_plan = _run(spark, folder, tmp_path / "ck_n", "native", SLIDING, POP_AGGS)
    python, python_prog, _ = _run(spark, folder, tmp_path / "ck_p", "python", SLIDING, POP_AGGS)

    assert "InPandasWithState" not in native_plan and "MapInArrow" not in native_plan, native_plan
    assert native_plan.count("StateStoreSave") == 2, native_plan
    native_at, python_at = _batch_of(native), _batch_of(python)
    assert native_at.keys() == python_at.keys() and len(set(native_at.values())) >= 3
    assert all(python_at[w] <= native_at[w] for w in native_at)
    ours = rows_by_window(r for rows in native.values() for r in rows)
    assert_same(ours, rows_by_window(r for rows in python.values() for r in rows))
    assert_same(ours, reference_windows(_events_with_times(batches), SLIDING, POP_AGGS))
    metric = [sum(p["observedMetrics"][NULL_TIME_METRIC]["rows"] for p in prog if p["numInputRows"])
              for prog in (native_prog, python_prog)]  # fmt: skip
    assert metric == [nulls, nulls] and nulls > 0


def test_sliding_rows_behind_the_watermark_on_the_native_engine(spark, tmp_path):
    """Late rows on a 20 s window sliding by 10 s, native engine: a row whose frame Spark has
    already emitted (its end at or behind the previous micro-batch's watermark) is dropped
    from every window, also from the later window that holds its frame and is still open
    (Spark's late-row rule on the frames); a row of an open frame counts in every window
    (docs/explanation/windows.md)."""
    folder = tmp_path / "in"
    folder.mkdir()
    files = [
        _rows(["a", "a"], [1, 12], wm_s=15),  # W -> 15 s
        _rows(["b"], [41], wm_s=15),          # frame [0, 10) and window [-10, 10) emitted
        _rows(["a", "a"], [5, 24], wm_s=15),  # 5 s: frame [0, 10) gone, window [0, 20) open
        heartbeat(BASE_US + 100 * SEC),       # closes every window
    ]  # fmt: skip
    for i, b in enumerate(files):
        write_batch(folder, i, b)
    emitted, _, _ = _run(spark, folder, tmp_path / "ck", "native", window=sliding("20 seconds", "10 seconds"),
                         aggs={"n": ops.count()})  # fmt: skip
    windows = rows_by_window(r for rows in emitted.values() for r in rows)
    got = {(k, (s - BASE_US) // SEC): r["n"] for (k, s, _), r in windows.items()}
    assert got == {("a", -10): 1, ("a", 0): 2, ("a", 10): 2, ("a", 20): 1, ("b", 30): 1, ("b", 40): 1}


def test_auto_streams_on_the_python_engine_and_native_is_asked_for(spark, tmp_path):
    """``engine="auto"`` keeps a stream on the Python engine (it emits a window one
    micro-batch sooner); ``"native"`` is Spark's aggregation, and refuses what it cannot run."""
    folder = tmp_path / "in"
    folder.mkdir()
    write_batch(folder, 0, make_batches(seed=1, batches=1, rows=10)[0])
    schema = spark.read.parquet(str(folder)).schema
    src = spark.readStream.schema(schema).parquet(str(folder)).withWatermark("watermark", "0 seconds")

    def plan(engine: str, window=WINDOW, aggs=AGGS, **extra) -> str:
        out = window_aggregate(src, key="k", time="ts", window=window, aggs=aggs, engine=engine, **extra)
        return out._jdf.queryExecution().analyzed().toString()

    assert "InPandasWithState" in plan("auto") and "InPandasWithState" not in plan("native")
    slide = sliding("30 seconds", "15 seconds")
    assert "InPandasWithState" in plan("auto", slide) and "InPandasWithState" not in plan("native", slide)
    refused = ((slide, {"early_results": "1 second"}), (WINDOW, {"early_results": "1 second"}),
               (slide, {"aggs": {"c": ops.collect_sorted("x")}}))  # fmt: skip
    for window, extra in refused:
        with pytest.raises(AggregateError, match="engine='native' on a stream runs tumbling and sliding"):
            plan("native", window, **{"aggs": AGGS, **extra})


@pytest.mark.parametrize(("written", "then", "operators"), [
    ({"engine": "python"}, {"engine": "native"}, ("applyInPandasWithState", "stateStoreSave")),
    ({"engine": "python", "state_api": "transformWithStateInPandas"}, {"engine": "python"},
     ("transformWithStateInPandasExec", "applyInPandasWithState")),
], ids=["python-then-native", "tws-then-default"])
def test_a_checkpoint_is_refused_by_another_stateful_operator_and_continues_on_its_own(
    spark, tmp_path, written, then, operators
):
    """A checkpoint written by the Python engine cannot continue on Spark's aggregation, nor
    one written on ``transformWithStateInPandas`` (jetspark 0.1.0's only state API) on the
    default ``applyInPandasWithState`` (different state): Spark refuses the first batch after
    the restart before it runs, naming both stateful operators (the error the upgrade notes
    quote), and the same checkpoint continues as it was written."""
    folder = tmp_path / "in"
    folder.mkdir()
    first, second = make_batches(seed=3, batches=2, rows=40)
    write_batch(folder, 0, first)
    aggs = {"n": ops.count()}
    _run(spark, folder, tmp_path / "ck", aggs=aggs, **written)
    write_batch(folder, 1, second)
    refusal = (rf"(?s)STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA"
               rf".*OperatorName: {operators[0]}.*OperatorName: {operators[1]}")
    with pytest.raises(Exception, match=refusal):
        _run(spark, folder, tmp_path / "ck", aggs=aggs, **then)
    emitted, progress, _ = _run(spark, folder, tmp_path / "ck", aggs=aggs, **written)
    assert sum(p["numInputRows"] for p in progress) == len(second["k"])  # the second file only
    assert emitted and all(r.n > 0 for rows in emitted.values() for r in rows)


def test_native_tumbling_counts_nan_as_null_like_the_python_engine_static(spark, tmp_path):
    """Static twin of the NaN rule: Spark's aggregation reads NaN as null, as numpy does."""
    df = spark.createDataFrame(
        [("a", "2026-01-01 00:00:01", float("nan")), ("a", "2026-01-01 00:00:02", 2.0),
         ("a", "2026-01-01 00:00:03", 4.0)], "k string, t string, x double",
    ).withColumn("ts", F.col("t").cast("timestamp"))  # fmt: skip
    aggs = {"n": ops.count("x"), "hi": ops.max_("x"), "m": ops.mean("x")}
    got = {e: [(r.n, r.hi, r.m) for r in window_aggregate(
        df, key="k", time="ts", window=tumbling("10 seconds"), aggs=aggs, engine=e).collect()]
        for e in ("auto", "python")}  # fmt: skip
    assert got["auto"] == got["python"] == [(2, 4.0, 3.0)]


def _rows(keys: list[str], seconds: list[int], wm_s: int) -> dict:
    n, ts = len(keys), np.array([BASE_US + s * SEC for s in seconds])
    return {"k": keys, "ts": ts, "x": np.ones(n), "y": np.zeros(n),
            "watermark": np.full(n, BASE_US + wm_s * SEC), "heartbeat": np.zeros(n, bool)}  # fmt: skip


def test_rows_behind_the_watermark_in_both_engines(spark, tmp_path):
    """Rows behind Spark's watermark (a source that keeps late rows): a row of a window
    already emitted is dropped by both engines; a row of a window that closes in the same
    micro-batch counts on the native engine (Spark's late-row rule: the previous batch's
    watermark) and not on the Python engine (docs/how-to/live-latency.md)."""
    folder = tmp_path / "in"
    folder.mkdir()
    files = [
        _rows(["a", "a"], [1, 12], wm_s=15),   # W -> 15 s after this batch
        _rows(["b"], [31], wm_s=25),           # emits a [0, 10); W -> 25 s
        _rows(["a", "a"], [3, 14], wm_s=25),   # 3 s: [0, 10) was emitted; 14 s: [10, 20) closes now
        heartbeat(BASE_US + 100 * SEC),        # closes every window
    ]  # fmt: skip
    for i, b in enumerate(files):
        write_batch(folder, i, b)
    aggs = {"n": ops.count()}
    got = {}
    for engine in ("native", "python"):
        emitted, _, _ = _run(spark, folder, tmp_path / f"ck_{engine}", engine, window=tumbling("10 seconds"),
                             aggs=aggs)  # fmt: skip
        windows = rows_by_window(r for rows in emitted.values() for r in rows)
        got[engine] = {(k, (s - BASE_US) // SEC): r["n"] for (k, s, _), r in windows.items()}
    assert got["python"] == {("a", 0): 1, ("a", 10): 1, ("b", 30): 1}
    assert got["native"] == {("a", 0): 1, ("a", 10): 2, ("b", 30): 1}


def test_static_engine_choice_for_sliding_windows(spark):
    """A static sliding window: ``engine="native"`` runs built-in operations as Spark's two
    aggregations (no Python in the plan); a user-defined operation, collect_sorted or a
    session window keep the Python engine's combining stage; ``"auto"`` keeps the Python
    combining stage (the native one is opt-in until it is measured faster,
    docs/explanation/windows.md)."""
    from tests.unit.windowing.test_core import SumOfSquares

    df = spark.createDataFrame([("a", 1, 1.0, 2.0)], "k string, t long, x double, y double")
    df = df.withColumn("ts", F.timestamp_micros("t"))

    def plan(engine: str, aggs=AGGS, window=SLIDING) -> str:
        out = window_aggregate(df, key="k", time="ts", window=window, aggs=aggs, engine=engine)
        return out._jdf.queryExecution().executedPlan().toString()

    assert "MapInArrow" not in plan("native") and "Generate explode" in plan("native")
    python_kept = [plan("native", {**AGGS, "sq": SumOfSquares("x")}),
                   plan("native", {"c": ops.collect_sorted("x")}),
                   plan("native", window=session("10 seconds")), plan("auto"), plan("python")]  # fmt: skip
    assert all("MapInArrow" in p for p in python_kept)


@pytest.mark.parametrize("state_api", ["applyInPandasWithState", "transformWithStateInPandas"])
def test_a_watermark_that_stalls_loses_no_row_on_the_python_engine(spark, tmp_path, state_api):
    """The source's W held at 15 s for three micro-batches (a slow partition holding it): the
    rows of the third, not late (24 s and 41 s are ahead of W), count in their windows. Before,
    the rows handed to Spark's stateful operator carried W as their event time, and Spark drops
    an input row at or behind the previous micro-batch's watermark: the third micro-batch was
    lost whole."""
    folder = tmp_path / "in"
    folder.mkdir()
    files = [
        _rows(["a", "a"], [1, 12], wm_s=15),
        _rows(["b"], [41], wm_s=15),
        _rows(["a"], [24], wm_s=15),           # W still 15 s: Spark's watermark is 15 s since batch 1
        heartbeat(BASE_US + 100 * SEC),        # closes every window
    ]  # fmt: skip
    for i, b in enumerate(files):
        write_batch(folder, i, b)
    emitted, _, _ = _run(spark, folder, tmp_path / "ck", "python", window=sliding("20 seconds", "10 seconds"),
                         aggs={"n": ops.count()}, state_api=state_api)  # fmt: skip
    windows = rows_by_window(r for rows in emitted.values() for r in rows)
    got = {(k, (s - BASE_US) // SEC): r["n"] for (k, s, _), r in windows.items()}
    assert got == {("a", -10): 1, ("a", 0): 2, ("a", 10): 2, ("a", 20): 1, ("b", 30): 1, ("b", 40): 1}
