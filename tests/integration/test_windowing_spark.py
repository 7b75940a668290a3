"""window_aggregate on a real local Spark: equal to Spark's window()/session_window() and to
the naive reference, batch and streaming, across a restart, with heartbeats."""

from __future__ import annotations

import datetime as dt
import math
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from jetspark.windowing import STATE_APIS, ops, session, sliding, tumbling, window_aggregate
from jetspark.windowing.reference import reference_windows

pytestmark = pytest.mark.integration

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
BASE_US = 1_704_067_200 * 1_000_000  # 2024-01-01
SEC = 1_000_000
LAG_S = 20
TS = pa.timestamp("us", tz="UTC")


def _us(d: dt.datetime) -> int:
    if d.tzinfo is None:  # Spark hands back naive datetimes in the session time zone (UTC)
        d = d.replace(tzinfo=dt.UTC)
    return (d - EPOCH) // dt.timedelta(microseconds=1)


def make_batches(seed: int, batches: int, rows: int, keys: int = 6, span_s: int = 90):
    """Micro-batches of events with a source-style watermark column (max ts - lag).

    Late events (older than the previous batch's watermark) are dropped as the source
    would, so Spark's withWatermark("ts", lag) computes the very same watermarks.
    """
    rng = np.random.default_rng(seed)
    out, wm = [], None
    for b in range(batches):
        t = BASE_US + (b * span_s + rng.integers(-15, span_s, rows)) * SEC + rng.integers(0, SEC, rows)
        if wm is not None:
            t = t[t >= wm]
        n = len(t)
        top = int(t.max()) - LAG_S * SEC
        wm = top if wm is None else max(wm, top)
        x = rng.normal(10.0, 4.0, n)
        x[rng.random(n) < 0.1] = np.nan
        out.append(
            {
                "k": [f"s{i}" for i in rng.integers(0, keys, n)],
                "ts": t,
                "x": x,
                "y": rng.normal(0.0, 1.0, n) + 0.5 * np.arange(n) / max(n, 1),
                "watermark": np.full(n, wm),
                "heartbeat": np.zeros(n, dtype=bool),
            }
        )
    return out


def write_batch(folder: Path, i: int, b: dict) -> None:
    table = pa.table(
        {
            "k": pa.array(b["k"], pa.string()),
            "ts": pa.array(b["ts"], TS),
            "x": pa.array(b["x"], pa.float64(), from_pandas=True),
            "y": pa.array(b["y"], pa.float64()),
            "watermark": pa.array(b["watermark"], TS),
            "heartbeat": pa.array(b["heartbeat"], pa.bool_()),
        }
    )
    f = folder / f"part-{i:04d}.parquet"
    pq.write_table(table, f)
    os.utime(f, (1_600_000_000 + i, 1_600_000_000 + i))


def heartbeat(wm_us: int) -> dict:
    return {"k": [None], "ts": [None], "x": [None], "y": [None], "watermark": [wm_us], "heartbeat": [True]}


def events_of(batches) -> list:
    evs = []
    for b in batches:
        for k, t, x, y, hb in zip(b["k"], b["ts"], b["x"], b["y"], b["heartbeat"], strict=True):
            if not hb:
                evs.append((k, int(t), {"x": None if x is None or math.isnan(x) else x, "y": y}))
    return evs


def rows_by_window(rows) -> dict:
    out = {}
    for r in rows:
        r = r.asDict()
        w = (r.pop("k"), _us(r.pop("window_start")), _us(r.pop("window_end")))
        assert w not in out, f"window emitted twice: {w}"
        out[w] = r
    return out


def close(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
    return math.isclose(a, b, rel_tol=1e-7, abs_tol=1e-7)


def assert_same(got: dict, expected: dict, names=None) -> None:
    assert len(got) > 0
    assert set(got) == set(expected), sorted(set(got) ^ set(expected))[:5]
    for w, res in expected.items():
        for name in names or res:
            assert close(got[w][name], res[name]), (w, name, got[w][name], res[name])


AGGS = {
    "n": ops.count(),
    "s": ops.sum("x"),
    "m": ops.avg("x"),
    "lo": ops.min("x"),
    "hi": ops.max("x"),
    "var": ops.var_samp("x"),
    "sd": ops.stddev_samp("x"),
    "slope": ops.regr_slope("y", "x"),  # Spark's order, as F.regr_slope("y", "x") below
    "icpt": ops.regr_intercept("y", "x"),
}


def column_aggs() -> dict:
    """AGGS with Column expressions for inputs (computed as hidden columns before windowing).
    Built in a test: a Column needs the active Spark session."""
    x, y = F.col("x") + 0.0, F.col("y") * 1.0
    return {"n": ops.count(), "s": ops.sum(x), "m": ops.mean(x), "lo": ops.min(x), "hi": ops.max(x),
            "var": ops.variance(x), "sd": ops.stddev(x), "slope": ops.regr_slope(y, x),
            "icpt": ops.regr_intercept(y, F.col("x"))}


def spark_aggs():
    return [
        F.count("*").alias("n"),
        F.sum("x").alias("s"),
        F.avg("x").alias("m"),
        F.min("x").alias("lo"),
        F.max("x").alias("hi"),
        F.var_samp("x").alias("var"),
        F.stddev_samp("x").alias("sd"),
        F.regr_slope("y", "x").alias("slope"),
        F.regr_intercept("y", "x").alias("icpt"),
    ]


def spark_windowed(df, window_col, name):
    return df.groupBy("k", window_col).agg(*spark_aggs()).select(
        "k", F.col(f"{name}.start").alias("window_start"), F.col(f"{name}.end").alias("window_end"),
        *AGGS,
    )  # fmt: skip


@pytest.fixture
def static_events(spark, tmp_path):
    batches = make_batches(seed=3, batches=3, rows=300)
    for i, b in enumerate(batches):
        write_batch(tmp_path, i, b)
    # NaN in parquet is a value for Spark; our generator means null
    df = spark.read.parquet(str(tmp_path)).withColumn("x", F.nanvl("x", F.lit(None)))
    return df, events_of(batches)


def test_static_sliding_equals_spark_window_and_reference(spark, static_events):
    df, evs = static_events
    for deduct in (True, False):
        ours = rows_by_window(
            window_aggregate(df, key="k", time="ts", window=sliding("30 seconds", "10 seconds"),
                             aggs={**AGGS, "seq": ops.collect_sorted("x")}, deduct=deduct).collect()
        )  # fmt: skip
        theirs = rows_by_window(
            spark_windowed(df, F.window("ts", "30 seconds", "10 seconds"), "window").collect()
        )
        assert_same(ours, theirs)
        ref = reference_windows(
            evs, sliding("30 seconds", "10 seconds"), {**AGGS, "seq": ops.collect_sorted("x")}
        )
        assert_same(ours, ref)


def test_static_session_equals_spark_session_window(spark, static_events):
    df, evs = static_events
    ours = rows_by_window(
        window_aggregate(df, key="k", time="ts", window=session("4 seconds"), aggs=AGGS).collect()
    )
    theirs = rows_by_window(
        spark_windowed(df, F.session_window("ts", "4 seconds"), "session_window").collect()
    )
    assert_same(ours, theirs)
    assert_same(ours, reference_windows(evs, session("4 seconds"), AGGS))


def test_seed_example_30s_window_sliding_by_10s_counts_events(spark):
    base = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    rows = [("car", base + dt.timedelta(seconds=s)) for s in (1, 5, 12, 29, 31, 65)]
    df = spark.createDataFrame(rows, "sensor string, ts timestamp")
    out = window_aggregate(df, key="sensor", time="ts", window=sliding("30 seconds", "10 seconds"),
                           aggs={"n": ops.count()})  # fmt: skip
    got = {(_us(r.window_start) - _us(base)) // SEC: r.n for r in out.collect()}
    # windows [start, start + 30 s) every 10 s, by start second relative to base
    assert got == {-20: 2, -10: 3, 0: 4, 10: 3, 20: 2, 30: 1, 40: 1, 50: 1, 60: 1}


def _stream(spark, folder: Path, schema, query_df_fn, out: Path, ckpt: Path):
    src = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(folder))
    q = (
        query_df_fn(src)
        .writeStream.format("parquet")
        .outputMode("append")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .start()
    )
    try:
        q.processAllAvailable()
        progress = q.recentProgress
    finally:
        q.stop()
    return progress


def _read(spark, out: Path):
    return spark.read.parquet(str(out)).collect()


def _ours(window, api, aggs=AGGS):
    def build(src):
        src = src.withColumn("x", F.nanvl("x", F.lit(None))).withWatermark("watermark", "0 seconds")
        return window_aggregate(src, key="k", time="ts", window=window, aggs=aggs, state_api=api, buckets=4)

    return build


def _theirs(window_col, name):
    def build(src):
        src = src.where(~F.col("heartbeat")).withColumn("x", F.nanvl("x", F.lit(None)))
        return spark_windowed(src.withWatermark("ts", f"{LAG_S} seconds"), window_col, name)

    return build


@pytest.fixture
def stream_dir(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    batches = make_batches(seed=11, batches=4, rows=150)
    for i, b in enumerate(batches):
        write_batch(folder, i, b)
    return folder, batches


@pytest.mark.parametrize("api", STATE_APIS)
def test_streaming_sliding_equals_spark_window_and_reference(spark, stream_dir, tmp_path, api):
    folder, batches = stream_dir
    schema = spark.read.parquet(str(folder)).schema
    window = sliding("30 seconds", "10 seconds")
    theirs_q = _theirs(F.window("ts", "30 seconds", "10 seconds"), "window")
    theirs_prog = _stream(spark, folder, schema, theirs_q, tmp_path / "theirs", tmp_path / "ck_theirs")
    spark_wm = _us(dt.datetime.fromisoformat(theirs_prog[-1]["eventTime"]["watermark"]))
    # a heartbeat row moves the watermark past every event: all windows close (ours only)
    final_wm = int(max(b["ts"].max() for b in batches)) + 60 * SEC
    write_batch(folder, len(batches), heartbeat(final_wm))
    prog = _stream(spark, folder, schema, _ours(window, api), tmp_path / "ours", tmp_path / "ck_ours")
    ours = rows_by_window(_read(spark, tmp_path / "ours"))
    theirs = rows_by_window(_read(spark, tmp_path / "theirs"))
    assert_same({w: r for w, r in ours.items() if w[2] <= spark_wm}, theirs)
    assert_same(ours, reference_windows(events_of(batches), window, AGGS))
    # state: at most one row per bucket, whatever the stream length
    assert all(op["numRowsTotal"] <= 4 for p in prog for op in p["stateOperators"])


def test_streaming_session_equals_spark_session_window(spark, stream_dir, tmp_path):
    """Also with Column arguments: a computed key shown under its alias, the time as a Column,
    and operations of Column expressions (hidden columns of the stream)."""
    folder, _ = stream_dir
    schema = spark.read.parquet(str(folder)).schema
    window = session("3 seconds")

    def ours(src):
        src = src.withColumn("x", F.nanvl("x", F.lit(None))).withWatermark("watermark", "0 seconds")
        return window_aggregate(src, key=F.concat("k", F.lit("")).alias("k"), time=F.col("ts"),
                                window=window, aggs=column_aggs(), buckets=4)

    _stream(spark, folder, schema, ours, tmp_path / "ours", tmp_path / "ck1")
    _stream(spark, folder, schema, _theirs(F.session_window("ts", "3 seconds"), "session_window"),
            tmp_path / "theirs", tmp_path / "ck2")  # fmt: skip
    assert_same(
        rows_by_window(_read(spark, tmp_path / "ours")), rows_by_window(_read(spark, tmp_path / "theirs"))
    )


@pytest.mark.parametrize("api", STATE_APIS)
def test_restart_from_checkpoint_mid_stream_gives_the_same_output(spark, tmp_path, api):
    batches = make_batches(seed=5, batches=5, rows=120)
    whole, part = tmp_path / "whole", tmp_path / "part"
    whole.mkdir()
    part.mkdir()
    for i, b in enumerate(batches):
        write_batch(whole, i, b)
        if i < 3:
            write_batch(part, i, b)
    schema = spark.read.parquet(str(whole)).schema
    aggs = {"n": ops.count(), "m": ops.mean("x"), "hi": ops.max_("x")}
    window = sliding("40 seconds", "10 seconds")
    build = _ours(window, api, aggs)
    _stream(spark, whole, schema, build, tmp_path / "o_whole", tmp_path / "ck_whole")
    _stream(spark, part, schema, build, tmp_path / "o_part", tmp_path / "ck_part")
    for i in (3, 4):
        shutil.copy(whole / f"part-{i:04d}.parquet", part / f"part-{i:04d}.parquet")
        os.utime(part / f"part-{i:04d}.parquet", (1_600_000_000 + i, 1_600_000_000 + i))
    _stream(spark, part, schema, build, tmp_path / "o_part", tmp_path / "ck_part")
    a = rows_by_window(_read(spark, tmp_path / "o_whole"))
    b = rows_by_window(_read(spark, tmp_path / "o_part"))
    assert_same(b, a)


_PYTHON_NODE = re.compile(r"\w*(?:Python|InArrow|InPandas)\w*")
"""Physical-plan nodes that run Python (PythonMapInArrow, ArrowEvalPython, BatchEvalPython…)."""


def python_nodes(df) -> list[str]:
    """The Python-running nodes of ``df``'s physical plan (empty: it runs in the JVM alone)."""
    return _PYTHON_NODE.findall(df._jdf.queryExecution().executedPlan().toString())


def test_static_tumbling_native_and_python_engines_agree_with_spark(spark, static_events):
    """``engine="auto"`` on static tumbling windows of built-in operations is Spark's own
    aggregation (no Python in the plan) and equals Spark's window() and the reference."""
    df, evs = static_events
    window = tumbling("15 seconds")
    theirs = rows_by_window(spark_windowed(df, F.window("ts", "15 seconds"), "window").collect())
    ours = window_aggregate(df, key="k", time="ts", window=window, aggs=AGGS, engine="auto")
    assert python_nodes(ours) == [], ours._jdf.queryExecution().executedPlan().toString()
    assert_same(rows_by_window(ours.collect()), theirs)
    assert_same(theirs, reference_windows(evs, window, AGGS))


def test_static_tumbling_python_engine_agrees_with_spark(spark, static_events):
    """The twin: ``engine="python"`` runs the same windows through Python and gives the same."""
    df, evs = static_events
    window = tumbling("15 seconds")
    theirs = rows_by_window(spark_windowed(df, F.window("ts", "15 seconds"), "window").collect())
    ours = window_aggregate(df, key="k", time="ts", window=window, aggs=AGGS, engine="python")
    assert python_nodes(ours), ours._jdf.queryExecution().executedPlan().toString()
    assert_same(rows_by_window(ours.collect()), theirs)
    assert_same(theirs, reference_windows(evs, window, AGGS))


@pytest.mark.parametrize("api", STATE_APIS)
def test_window_ending_exactly_at_the_watermark_is_emitted_as_by_spark(spark, tmp_path, api):
    """Append mode closes a window when watermark >= its end (Spark's rule for window()):
    at watermark == end it is emitted, one millisecond earlier it is not."""
    window_end = BASE_US + 10 * SEC
    for offset_us, emitted in ((0, True), (-1000, False)):
        run = tmp_path / f"off{-offset_us}"
        folder = run / "in"
        folder.mkdir(parents=True)
        wm = window_end + offset_us
        # "a" fills tumbling window [0 s, 10 s); "z" at wm + LAG_S sets Spark's watermark
        # (max event time − LAG_S) to exactly wm; the source-style column says the same
        batch = {
            "k": ["a", "a", "z"],
            "ts": np.array([BASE_US + SEC, BASE_US + 5 * SEC, wm + LAG_S * SEC]),
            "x": np.array([1.0, 2.0, 3.0]),
            "y": np.array([0.0, 1.0, 2.0]),
            "watermark": np.full(3, wm),
            "heartbeat": np.zeros(3, dtype=bool),
        }
        write_batch(folder, 0, batch)
        schema = spark.read.parquet(str(folder)).schema
        aggs = {"n": ops.count(), "s": ops.sum_("x")}
        out_ddl = "k string, window_start timestamp, window_end timestamp, n bigint, s double"
        ours_q = _ours(tumbling("10 seconds"), api, aggs)
        prog = _stream(spark, folder, schema, ours_q, run / "ours", run / "ck1")
        assert max(_us(dt.datetime.fromisoformat(p["eventTime"]["watermark"])) for p in prog) == wm
        ours = rows_by_window(spark.read.schema(out_ddl).parquet(str(run / "ours")).collect())
        a_window = ("a", BASE_US, window_end)
        assert set(ours) == ({a_window} if emitted else set())
        if emitted:
            assert ours[a_window] == {"n": 2, "s": 3.0}
        if api == STATE_APIS[0]:
            theirs_q = _theirs(F.window("ts", "10 seconds"), "window")
            theirs_prog = _stream(spark, folder, schema, theirs_q, run / "theirs", run / "ck2")
            assert max(_us(dt.datetime.fromisoformat(p["eventTime"]["watermark"])) for p in theirs_prog) == wm
            theirs = rows_by_window(spark.read.schema(out_ddl).parquet(str(run / "theirs")).collect())
            assert theirs == ours


def _events(secs: list[int], wm_s: int) -> dict:
    """Key "a" at ``secs`` after BASE, the source-style watermark column at ``wm_s``."""
    n = len(secs)
    return {"k": ["a"] * n, "ts": np.array([BASE_US + t * SEC for t in secs]), "x": np.ones(n),
            "y": np.zeros(n), "watermark": np.full(n, BASE_US + wm_s * SEC),
            "heartbeat": np.zeros(n, dtype=bool)}


def _tumbling_counts_by_batch(src, api: str, checkpoint: Path) -> dict[int, list[tuple[int, int]]]:
    """Per micro-batch, the (start s after BASE, count) of the 10-second windows of key "k" a
    streaming ``window_aggregate`` of ``src`` emits, run until all input is processed."""
    out: dict[int, list] = {}
    windows = window_aggregate(src, key="k", time="ts", window=tumbling("10 seconds"),
                               aggs={"n": ops.count()}, state_api=api, buckets=1)
    q = (windows.writeStream.foreachBatch(lambda df, i: out.__setitem__(i, df.collect()))
         .option("checkpointLocation", str(checkpoint)).start())
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    return {b: sorted(((_us(r.window_start) - BASE_US) // SEC, r.n) for r in rows) for b, rows in out.items()}


@pytest.mark.parametrize("api", STATE_APIS)
def test_the_carried_watermark_takes_off_the_watermark_delay(spark, tmp_path, api):
    """With ``withWatermark("watermark", "5 seconds")`` a batch closes the windows ending up to
    its own watermark column less 5 s, not up to the column itself: [0 s, 10 s) in batch 0
    (column 22 s: 17 s), [10 s, 20 s) — whose end lies between 17 s and 22 s — only in batch 1
    (column 30 s), with batch 1's event in it."""
    folder = tmp_path / "in"
    folder.mkdir()
    write_batch(folder, 0, _events([1, 2, 3, 11, 12], wm_s=22))
    write_batch(folder, 1, _events([13], wm_s=30))
    schema = spark.read.parquet(str(folder)).schema
    src = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(folder))
           .withWatermark("watermark", "5 seconds"))
    got = _tumbling_counts_by_batch(src, api, tmp_path / "ck")
    assert got[0] == [(0, 3)] and got[1] == [(10, 3)], got
    assert all(not rows for b, rows in got.items() if b > 1), got


@pytest.mark.parametrize("api", STATE_APIS)
def test_a_union_of_streams_waits_for_sparks_watermark_not_the_carried_one(spark, tmp_path, api):
    """Two streams, each with its own ``withWatermark``: Spark's watermark is their minimum,
    which no row carries, so no window may leave by a row's own watermark column (the carried
    one). Stream A's rows say 22 s, stream B's 5 s: [0 s, 10 s) must wait for B, whose next
    batch still brings an event at 6 s; it leaves with all five events once Spark's watermark
    (the minimum, 22 s) passes it."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    write_batch(a, 0, _events([1, 2, 3, 11], wm_s=22))
    write_batch(b, 0, _events([4], wm_s=5))
    write_batch(b, 1, _events([6], wm_s=30))
    schema = spark.read.parquet(str(a)).schema

    def stream(folder):
        return (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(folder))
                .withWatermark("watermark", "0 seconds"))

    got = _tumbling_counts_by_batch(stream(a).unionByName(stream(b)), api, tmp_path / "ck")
    assert not got.get(0), got  # batch 0: Spark's watermark is still B's 5 s
    emitted = sorted(w for rows in got.values() for w in rows)
    assert emitted == [(0, 5), (10, 1)], got


NATIVE_CELL_AGGS = {k: AGGS[k] for k in ("n", "s", "m", "lo", "hi", "var", "sd")}


def _python_stages(df) -> int:
    """Number of Python map-in-Arrow operators in the executed plan."""
    df.collect()
    plan = df._jdf.queryExecution().executedPlan().toString()
    return plan.split("== Initial Plan ==")[0].count("MapInArrow")  # the final adaptive plan


@pytest.mark.parametrize("deduct", [True, False])
def test_static_sliding_with_spark_computed_cells_equals_spark_window_and_reference(
    spark, static_events, deduct
):
    """Built-in operations Spark can accumulate: stage 1 is Spark's aggregation per
    (key, frame) and Python runs once (stage 2); the Python engine runs both stages.
    Both equal window() and the reference."""
    df, evs = static_events
    window = sliding("30 seconds", "10 seconds")
    theirs = rows_by_window(
        spark_windowed(df, F.window("ts", "30 seconds", "10 seconds"), "window").collect()
    )
    ref = reference_windows(evs, window, NATIVE_CELL_AGGS)
    for engine, python_stages in (("auto", 1), ("python", 2)):
        q = window_aggregate(
            df, key="k", time="ts", window=window, aggs=NATIVE_CELL_AGGS, deduct=deduct, engine=engine
        )
        assert _python_stages(q) == python_stages
        ours = rows_by_window(q.collect())
        assert_same(ours, theirs, names=list(NATIVE_CELL_AGGS))
        assert_same(ours, ref)


def _with_null_times(batches, seed: int):
    """The batches with every 7th event's time set to null (the rest unchanged); also the
    number of such rows."""
    rng = np.random.default_rng(seed)
    out, nulls = [], 0
    for b in batches:
        b = dict(b)
        null = rng.random(len(b["ts"])) < 1 / 7
        b["ts"] = [None if z else int(t) for t, z in zip(b["ts"], null, strict=True)]
        nulls += int(null.sum())
        out.append(b)
    return out, nulls


def _events_with_times(batches) -> list:
    return events_of([{**b, "ts": [t for t in b["ts"] if t is not None],
                       **{c: [v for v, t in zip(b[c], b["ts"], strict=True) if t is not None]
                          for c in ("k", "x", "y", "heartbeat")}} for b in batches])  # fmt: skip


def test_static_rows_with_a_null_event_time_are_in_no_window_and_counted(spark, tmp_path):
    """As Spark's window()/session_window(): null event times are left out — on every
    static path (Spark's tumbling aggregation, Spark-computed cells, Python stage 1,
    sessions) — and the Observation counts them."""
    from pyspark.sql import Observation

    batches, nulls = _with_null_times(make_batches(seed=7, batches=3, rows=200), seed=1)
    for i, b in enumerate(batches):
        write_batch(tmp_path, i, b)
    df = spark.read.parquet(str(tmp_path)).withColumn("x", F.nanvl("x", F.lit(None)))
    assert nulls > 0 and df.where(F.col("ts").isNull()).count() == nulls
    evs = _events_with_times(batches)
    cases = [
        (tumbling("15 seconds"), F.window("ts", "15 seconds"), "window", NATIVE_CELL_AGGS, "auto"),
        (sliding("30 seconds", "10 seconds"), F.window("ts", "30 seconds", "10 seconds"), "window",
         NATIVE_CELL_AGGS, "auto"),
        (sliding("30 seconds", "10 seconds"), F.window("ts", "30 seconds", "10 seconds"), "window", AGGS,
         "python"),
        (session("4 seconds"), F.session_window("ts", "4 seconds"), "session_window", AGGS, "auto"),
    ]  # fmt: skip
    for window, spark_window_col, name, aggs, engine in cases:
        obs = Observation(f"nulls_{len(aggs)}_{engine}_{name}_{id(window)}")
        ours = rows_by_window(
            window_aggregate(df, key="k", time="ts", window=window, aggs=aggs, engine=engine,
                             observation=obs).collect()
        )  # fmt: skip
        theirs = rows_by_window(spark_windowed(df, spark_window_col, name).collect())
        assert_same(ours, theirs, names=list(aggs))
        assert_same(ours, reference_windows(evs, window, aggs))
        assert obs.get == {"rows": nulls}


def test_streaming_rows_with_a_null_event_time_are_in_no_window_and_reported(spark, tmp_path):
    """A streaming query keeps running on null event times, leaves those rows out as
    Spark's window() does, and reports them per micro-batch as an observed metric."""
    from jetspark.windowing import NULL_TIME_METRIC

    folder = tmp_path / "in"
    folder.mkdir()
    batches, nulls = _with_null_times(make_batches(seed=13, batches=4, rows=150), seed=2)
    for i, b in enumerate(batches):
        write_batch(folder, i, b)
    schema = spark.read.parquet(str(folder)).schema
    window = sliding("30 seconds", "10 seconds")
    theirs_q = _theirs(F.window("ts", "30 seconds", "10 seconds"), "window")
    theirs_prog = _stream(spark, folder, schema, theirs_q, tmp_path / "theirs", tmp_path / "ck_theirs")
    spark_wm = _us(dt.datetime.fromisoformat(theirs_prog[-1]["eventTime"]["watermark"]))
    final_wm = max(t for b in batches for t in b["ts"] if t is not None) + 60 * SEC
    write_batch(folder, len(batches), heartbeat(final_wm))
    prog = _stream(
        spark, folder, schema, _ours(window, STATE_APIS[0]), tmp_path / "ours", tmp_path / "ck_ours"
    )
    ours = rows_by_window(_read(spark, tmp_path / "ours"))
    theirs = rows_by_window(_read(spark, tmp_path / "theirs"))
    assert_same({w: r for w, r in ours.items() if w[2] <= spark_wm}, theirs)
    assert_same(ours, reference_windows(_events_with_times(batches), window, AGGS))
    per_batch = [p["observedMetrics"][NULL_TIME_METRIC]["rows"] for p in prog if p["numInputRows"]]
    assert sum(per_batch) == nulls and len([n for n in per_batch if n]) == len(batches)


def test_spark_computed_cells_stay_correct_when_spark_shuffles_by_all_grouping_keys(spark, static_events):
    """With spark.sql.requireAllClusterKeysForDistribution, Spark would shuffle the cells by
    (key, frame) and split a key's frames over partitions: the Python stage 1 is used then."""
    df, _ = static_events
    window = sliding("30 seconds", "10 seconds")
    theirs = rows_by_window(
        spark_windowed(df, F.window("ts", "30 seconds", "10 seconds"), "window").collect()
    )
    spark.conf.set("spark.sql.requireAllClusterKeysForDistribution", "true")
    try:
        q = window_aggregate(df, key="k", time="ts", window=window, aggs=NATIVE_CELL_AGGS)
        assert _python_stages(q) == 2
        ours = rows_by_window(q.collect())
    finally:
        spark.conf.unset("spark.sql.requireAllClusterKeysForDistribution")
    assert_same(ours, theirs, names=list(NATIVE_CELL_AGGS))


def test_streaming_null_time_metric_takes_the_name_given(spark, tmp_path):
    """Two window aggregations in one query need two metric names: ``observation`` names it."""
    from pyspark.sql import Observation

    from jetspark.windowing.aggregate_operation import AggregateError

    folder = tmp_path / "in"
    folder.mkdir()
    write_batch(folder, 0, make_batches(seed=3, batches=1, rows=20)[0])
    schema = spark.read.parquet(str(folder)).schema
    stream = spark.readStream.schema(schema).parquet(str(folder)).withWatermark("ts", "0 seconds")
    window = sliding("30 seconds", "10 seconds")
    q = window_aggregate(stream, key="k", time="ts", window=window, aggs=AGGS, observation="null_times_a")
    plan = q._jdf.queryExecution().logical().toString()
    assert "CollectMetrics null_times_a" in plan and "jetspark_null_event_time" not in plan
    with pytest.raises(AggregateError, match="name \\(a string\\) of the observed metric"):
        window_aggregate(stream, key="k", time="ts", window=window, aggs=AGGS, observation=Observation("o"))


def test_event_time_must_be_a_timestamp_and_timestamp_ntz_agrees_with_spark(spark):
    """A bigint event time fails with the column, its type and the conversion to use (it used
    to be read as microseconds by one engine and fail inside Spark in the other); timestamp_ntz
    windows equal Spark's window() on the same column, in both engines."""
    from jetspark.windowing.aggregate_operation import AggregateError

    df = spark.createDataFrame([("a", "2026-01-01 00:00:05", 1.0), ("a", "2026-01-01 00:00:15", 2.0),
                                ("b", "2026-01-01 00:00:09", 3.0)], "k string, t string, v double")
    as_long = df.withColumn("ts", F.unix_millis(F.col("t").cast("timestamp")))
    for engine in ("auto", "python"):
        with pytest.raises(AggregateError, match=r"'ts' is bigint.*F\.timestamp_millis\('ts'\)"):
            window_aggregate(as_long, key="k", time="ts", window=tumbling("10 seconds"),
                             aggs={"n": ops.count()}, engine=engine)
    ntz = df.withColumn("ts", F.col("t").cast("timestamp_ntz"))
    spark_rows = ntz.groupBy("k", F.window("ts", "10 seconds")).agg(F.count("*").alias("n")).collect()
    theirs = sorted((r.k, r.window.start, r.window.end, r.n) for r in spark_rows)
    assert len(theirs) == 3
    for engine in ("auto", "python"):
        ours = window_aggregate(ntz, key="k", time="ts", window=tumbling("10 seconds"),
                                aggs={"n": ops.count()}, engine=engine)
        assert sorted((r.k, r.window_start, r.window_end, r.n) for r in ours.collect()) == theirs


def test_edge_inputs_agree_with_spark_in_both_engines(spark):
    """count of a string column, sums of bigints beyond 2**53, and frames of year 5000 with a
    1 ms slide equal Spark's window(); an op that reads numbers refuses a string column by name.
    (count(string) used to fail casting '' to double; bigints beyond 2**53 failed a safe cast;
    Spark-computed frames came from a double division, off by one in year 5000.)"""
    from jetspark.windowing.aggregate_operation import AggregateError

    far = 95_617_584_000_000_000  # 5000-01-01 in epoch microseconds
    big = 2**60  # sums stay in a long for Spark; beyond 2**53 for doubles
    df = spark.createDataFrame(
        [("a", far + 1_000, "x", big), ("a", far + 1_999, "", big + 1), ("a", far + 2_000, None, -3),
         ("b", far + 2_999, "y", None)], "k string, us long, s string, v long",
    ).withColumn("ts", F.timestamp_micros("us"))
    spark_rows = df.groupBy("k", F.window("ts", "3 milliseconds", "1 millisecond")).agg(
        F.count("s").alias("n"), F.sum("v").alias("total")).collect()
    theirs = sorted((r.k, r.window.start, r.n, r.total) for r in spark_rows)
    assert len(theirs) == 7
    aggs = {"n": ops.count("s"), "total": ops.sum_("v")}
    for engine in ("auto", "python"):
        ours = window_aggregate(df, key="k", time="ts", window=sliding("3 milliseconds", "1 millisecond"),
                                aggs=aggs, engine=engine).collect()
        got = sorted((r.k, r.window_start, r.n, r.total) for r in ours)
        assert [g[:3] for g in got] == [t[:3] for t in theirs], engine
        for g, t in zip(got, theirs, strict=True):  # read as doubles: rounded beyond 2**53
            assert (g[3] is None) == (t[3] is None)
            assert t[3] is None or g[3] == pytest.approx(t[3], rel=1e-15)
        with pytest.raises(AggregateError, match=r"'s' is string.*count\(column\) takes any type"):
            window_aggregate(df, key="k", time="ts", window=tumbling("1 second"),
                             aggs={"top": ops.max_("s")}, engine=engine)


def test_struct_array_and_float_keys_group_as_spark_does(spark):
    """Struct and array keys (they failed in dictionary_encode on the Python engine), and a
    double key holding -0.0 and 0.0 (one key in Spark), against Spark's window()."""
    df = spark.createDataFrame(
        [((1, "x"), [1, 2], -0.0, 1), ((1, "x"), [1, 2], 0.0, 2), (None, None, None, 4),
         ((2, None), [], 1.5, 3500)],
        "s struct<a:int,b:string>, l array<int>, f double, ms long",
    ).withColumn("ts", F.timestamp_millis("ms"))
    for key in ("s", "l", "f"):
        spark_rows = (df.groupBy(key, F.window("ts", "2 seconds", "1 second"))
                      .agg(F.count("*").alias("n")).collect())
        theirs = sorted((str(r[key]), r.window.start, r.n) for r in spark_rows)
        for engine in ("auto", "python"):
            ours = window_aggregate(df, key=key, time="ts", window=sliding("2 seconds", "1 second"),
                                    aggs={"n": ops.count()}, engine=engine).collect()
            assert sorted((str(r[key]), r.window_start, r.n) for r in ours) == theirs, (key, engine)


def test_column_arguments_and_spark_names_equal_spark_on_the_same_expressions(spark, static_events):
    """key, time and operations given as Columns (a computed key is shown under Spark's name for
    it), under Spark's names and argument order — regr_slope(y, x) is F.regr_slope(y, x) —
    in each engine's path: Spark-computed cells, Spark's tumbling aggregation, Python."""
    from jetspark.windowing.aggregate_operation import AggregateError

    df, _ = static_events
    x2, y = F.col("x") * 2, F.col("y")
    cells = {"n": ops.count(F.col("x")), "s": ops.sum(x2), "m": ops.avg(x2), "lo": ops.min(x2),
             "hi": ops.max("x"), "var": ops.var_samp(x2), "sd": ops.stddev_samp(x2)}
    regr = {"slope": ops.regr_slope(y, "x"), "icpt": ops.regr_intercept("y", F.col("x")),
            "trend": ops.linear_trend("x", y)}
    pop = {"vp": ops.var_pop(x2), "sp": ops.stddev_pop("x")}  # no Spark form here: Python
    spark_cols = {"n": F.count("x"), "s": F.sum(x2), "m": F.avg(x2), "lo": F.min(x2), "hi": F.max("x"),
                  "var": F.var_samp(x2), "sd": F.stddev_samp(x2), "slope": F.regr_slope("y", "x"),
                  "icpt": F.regr_intercept("y", "x"), "trend": F.regr_slope("y", "x"),
                  "vp": F.var_pop(x2), "sp": F.stddev_pop("x")}
    runs = [  # (window, Spark's window, aggregates, engine, how many stages run in Python)
        (sliding("30 seconds", "10 seconds"), F.window("ts", "30 seconds", "10 seconds"), cells, "auto", 1),
        (tumbling("20 seconds"), F.window("ts", "20 seconds"), {**cells, **regr}, "auto", 0),
        (sliding("30 seconds", "10 seconds"), F.window("ts", "30 seconds", "10 seconds"),
         {**cells, **regr, **pop}, "python", 2),
    ]
    for window, spark_window, aggs, engine, python_stages in runs:
        ours = window_aggregate(df, key=F.upper("k"), time=F.col("ts"), window=window, aggs=aggs,
                                engine=engine)
        assert ours.columns[:3] == ["upper(k)", "window_start", "window_end"]
        assert ours._jdf.queryExecution().executedPlan().toString().count("MapInArrow") == python_stages
        theirs = df.groupBy(F.upper("k"), spark_window.alias("w")).agg(
            *(spark_cols[name].alias(name) for name in aggs))
        theirs = theirs.select(F.col("upper(k)").alias("k"), F.col("w.start").alias("window_start"),
                               F.col("w.end").alias("window_end"), *aggs)
        got = rows_by_window(ours.withColumnRenamed("upper(k)", "k").collect())
        assert_same(got, rows_by_window(theirs.collect()))
    assert regr["slope"].inputs[1] is y  # the user's operation keeps its Column
    with pytest.raises(AggregateError, match=r"'upper\(k\)' is string"):
        window_aggregate(df, key="k", time="ts", window=tumbling("1 second"),
                         aggs={"m": ops.max(F.upper("k"))})
