"""Benchmark: jetspark frame windowing vs Spark's window(), a plain-Spark frame query and
Spark's cheapest aggregation of the same data ("the floor").

Same events for everyone (default 2 million, 1000 keys, 24 h of event time, written once
as parquet, one file per hour, in time order with shuffled rows inside an hour). Sliding
windows with a 1-minute slide and size = ratio × slide for ratio in 1, 10, 100; aggregates
count, sum and max of a value. Runs alternate between the contenders (order reversed
every other repetition); the **median** of ``--repeat`` runs is the headline figure (the
best is reported too), with wall seconds and the CPU seconds of the whole local Spark
(JVM and Python workers: a figure that moves less than wall time on a loaded machine).
The load average is printed with every figure, and so is the number of Python processes Spark
started during a run: Spark ends a Python worker idle for a minute, so a jetspark run that
follows more than a minute of JVM-only contenders (``window()`` at size/slide 100) starts new
ones, which import their modules before doing any work; the report counts such runs.

* ``spark-window``: ``groupBy(key, window(ts, size, slide)).agg(…)``
* ``spark-frames`` (batch only; window functions do not run on streams): aggregate per
  (key, frame), complete the key × frame grid, combine with
  ``ROWS BETWEEN k-1 PRECEDING AND CURRENT ROW`` — exactly window()'s windows.
* ``spark-floor``: what every contender must at least do, in Spark's cheapest form; the
  bench prints ``window()`` / floor as the ceiling of any speed-up over ``window()``, and
  jetspark's time over the floor's.

  - batch: Spark's own aggregation of the same aggregates per (key, 1-minute frame) —
    read, shuffle by key, group by key and frame — with no windows at all;
  - streaming: Spark's cheapest stateful streaming aggregation on the same source and
    micro-batches — a built-in tumbling ``count`` per key over 1-minute windows with the
    same watermark. Every stateful micro-batch pays at least this (compared per
    micro-batch).
* ``floor-python`` (batch only; not run by default): the floor's cells handed to a Python
  worker and back unchanged (a ``mapInArrow`` that returns its batches): what the two
  Arrow transfers of any Python stage 2 cost on top of the floor, with no window work.
* ``jetspark``: ``window_aggregate(…)``; not run by default: ``jetspark-python`` (batch,
  ``engine="python"``: stage 1 in Python, no Spark-computed cells) and ``jetspark-tws``
  (streaming on ``transformWithStateInPandas``; ``jetspark`` runs on ``applyInPandasWithState``),
  ``jetspark-native`` (``engine="native"``: sliding windows as two Spark aggregations, batch
  and streaming, no Python worker).

Where jetspark's time goes, batch (``--breakdown``, on by default): the query cut after
each stage (``window_aggregate_stages``: input handed over, shuffle, stage 1, the cells
handed to Python and dropped, stage 2 computed but dropped, output), each cut timed like
the query; the increments are the stages' costs. Streaming: Spark's own per-micro-batch
durations (``durationMs``) and the state operator's update/commit times from the query
progress, averaged per micro-batch.

Streaming: a file stream with ``maxFilesPerTrigger`` = each of ``--files-per-trigger``
(default ``6,1``: 4 micro-batches of 6 h, then 24 of 1 h — the same split for every
contender) and ``Trigger.AvailableNow``; the files carry a ``watermark`` column =
greatest event time so far − 1 minute, which is what ``withWatermark("ts", "1 minute")``
computes for Spark. Results go to the ``noop`` sink. A report (markdown and JSON) is
written to ``bench/reports/``.

The full comparison, for a quiet machine (about 25–35 min at 2 M events on 2 cores)::

    .venv/bin/python bench/bench_windowing.py --ratios 1,10,100 --modes batch,stream --repeat 3

Development (relative figures, under load): ``--events 500000 --ratios 100 --modes batch``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from plots import runs_chart

SLIDE_S = 60
LAG_S = 60
HOURS = 24
BASE_S = 1_700_000_000 // 3600 * 3600


def generate(path: Path, events: int, keys: int, seed: int = 42) -> None:
    """One parquet file per hour of event time; rows shuffled within the hour."""
    rng = np.random.default_rng(seed)
    per_hour = np.full(HOURS, events // HOURS)
    per_hour[: events % HOURS] += 1
    top = None
    for h in range(HOURS):
        n = int(per_hour[h])
        t_us = (BASE_S + h * 3600) * 1_000_000 + rng.integers(0, 3600 * 1_000_000, n)
        top = int(t_us.max()) if top is None else max(top, int(t_us.max()))
        wm = top - LAG_S * 1_000_000
        table = pa.table(
            {
                "key": rng.integers(0, keys, n),
                "ts": pa.array(t_us, pa.timestamp("us", tz="UTC")),
                "value": rng.normal(50.0, 15.0, n),
                "watermark": pa.array(np.full(n, wm), pa.timestamp("us", tz="UTC")),
            }
        )
        f = path / f"part-{h:04d}.parquet"
        pq.write_table(table, f)
        os.utime(f, (1_600_000_000 + h, 1_600_000_000 + h))  # file stream order = time order


def spark_window(df, ratio: int):
    from pyspark.sql import functions as F

    w = F.window("ts", f"{ratio * SLIDE_S} seconds", f"{SLIDE_S} seconds")
    return df.groupBy("key", w).agg(
        F.count("*").alias("n"), F.sum("value").alias("total"), F.max("value").alias("peak")
    ).select("key", F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
             "n", "total", "peak")  # fmt: skip


def spark_frames(spark, df, ratio: int):
    """Plain Spark: per (key, frame) aggregation, key × frame grid, ROWS BETWEEN window."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    slide_us = SLIDE_S * 1_000_000
    k = ratio
    t = F.unix_micros("ts")
    frames = df.groupBy("key", ((t - F.pmod(t, F.lit(slide_us))) / slide_us).cast("long").alias("frame")).agg(
        F.count("*").alias("fn"), F.sum("value").alias("fs"), F.max("value").alias("fm")
    )
    bounds = frames.agg(F.min("frame").alias("lo"), (F.max("frame") + (k - 1)).alias("hi"))
    grid = (
        frames.select("key")
        .distinct()
        .crossJoin(bounds.select(F.explode(F.sequence("lo", "hi")).alias("frame")))
    )
    w = Window.partitionBy("key").orderBy("frame").rowsBetween(-(k - 1), 0)
    full = grid.join(frames, ["key", "frame"], "left")
    out = full.select(
        "key",
        "frame",
        F.sum("fn").over(w).alias("n"),
        F.sum("fs").over(w).alias("total"),
        F.max("fm").over(w).alias("peak"),
    ).where(F.col("n") > 0)
    return out.select(
        "key",
        F.timestamp_micros((F.col("frame") - (k - 1)) * slide_us).alias("window_start"),
        F.timestamp_micros((F.col("frame") + 1) * slide_us).alias("window_end"),
        "n",
        "total",
        "peak",
    )


BUCKETS = 16  # window_aggregate's default; --buckets


def jetspark(df, ratio: int, state_api: str | None = None, engine: str = "auto"):
    from jetspark.windowing import ops, sliding, window_aggregate

    return window_aggregate(
        df,
        key="key",
        time="ts",
        window=sliding(f"{ratio * SLIDE_S} seconds", f"{SLIDE_S} seconds"),
        aggs={"n": ops.count(), "total": ops.sum_("value"), "peak": ops.max_("value")},
        state_api=state_api,
        engine=engine,
        buckets=BUCKETS,
    )


def spark_floor(df):
    """Streaming: Spark's cheapest stateful aggregation, a tumbling 1-minute count per key.
    Batch: the aggregates per (key, frame), the least any windowed plan must compute."""
    from pyspark.sql import functions as F

    if df.isStreaming:
        return df.groupBy("key", F.window("ts", f"{SLIDE_S} seconds")).agg(F.count("*").alias("n"))
    t = F.unix_micros("ts")
    frame = (t - F.pmod(t, F.lit(SLIDE_S * 1_000_000))).alias("frame")
    return df.groupBy("key", frame).agg(
        F.count("*").alias("n"), F.sum("value").alias("total"), F.max("value").alias("peak")
    )


_TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu_s() -> float:
    """CPU seconds used so far by this process's descendants (the local Spark JVM and its
    Python workers; reaped children count through their parents)."""
    children: dict[int, list[tuple[int, int]]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # after the name: state ppid … utime stime cutime cstime at 11..14
        children.setdefault(int(fields[1]), []).append((int(entry), sum(map(int, fields[11:15]))))
    total, todo = 0, [os.getpid()]
    while todo:
        for pid, ticks in children.get(todo.pop(), []):
            total += ticks
            todo.append(pid)
    return total / _TICK


def python_processes() -> set[int]:
    """PIDs of this process's descendant Python processes: Spark's Python daemon and workers."""
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        name = raw[raw.index("(") + 1 : raw.rindex(")")]
        children.setdefault(int(raw.rsplit(")", 1)[1].split()[1]), []).append((int(entry), name))
    found, todo = set(), [os.getpid()]
    while todo:
        for pid, name in children.get(todo.pop(), []):
            if name.startswith("python"):
                found.add(pid)
            todo.append(pid)
    return found


def load() -> float:
    return os.getloadavg()[0]


def timed(action) -> tuple[float, float, object]:
    """(wall s, CPU s of the local Spark, action's result)."""
    c0, t0 = tree_cpu_s(), time.perf_counter()
    out = action()
    return time.perf_counter() - t0, tree_cpu_s() - c0, out


def timed_run(action) -> dict:
    """``timed`` as a run's record, with how many Python processes (workers, daemon) Spark
    started during it: Spark ends a worker idle for a minute, so a jetspark run after more
    than a minute of JVM-only contenders starts new ones (each imports its modules again
    before any work)."""
    before = python_processes()
    wall, cpu, out = timed(action)
    return {"wall": wall, "cpu": cpu, "new_py_processes": len(python_processes() - before), "out": out}


def _passthrough(batches):
    yield from batches


def _noop(df) -> None:
    df.write.format("noop").mode("overwrite").save()


def batch_query(spark, data: Path, contender: str, ratio: int):
    df = spark.read.parquet(str(data))
    if contender == "spark-window":
        return spark_window(df, ratio)
    if contender == "spark-frames":
        return spark_frames(spark, df, ratio)
    if contender == "spark-floor":
        return spark_floor(df)
    if contender == "floor-python":
        cells = spark_floor(df)
        return cells.mapInArrow(_passthrough, cells.schema)
    engine = {"jetspark-python": "python", "jetspark-native": "native"}.get(contender, "auto")
    return jetspark(df.drop("watermark"), ratio, engine=engine)


def run_batch(spark, data: Path, contender: str, ratio: int) -> dict:
    q = batch_query(spark, data, contender, ratio)
    r = timed_run(lambda: _noop(q))
    del r["out"]
    return r


def batch_breakdown(spark, data: Path, ratio: int) -> dict[str, tuple[float, float]]:
    """Cost of each stage of jetspark's static query: (wall s, CPU s) increments between
    consecutive cuts of ``window_aggregate_stages``."""
    from jetspark.windowing import ops, sliding
    from jetspark.windowing.api import window_aggregate_stages

    df = spark.read.parquet(str(data)).drop("watermark")
    stages = window_aggregate_stages(
        df, "key", "ts", sliding(f"{ratio * SLIDE_S} seconds", f"{SLIDE_S} seconds"),
        {"n": ops.count(), "total": ops.sum_("value"), "peak": ops.max_("value")},
    )  # fmt: skip
    out, prev = {}, (0.0, 0.0)
    for name, q in stages.items():
        wall, cpu, _ = timed(lambda q=q: _noop(q))
        out[name] = (wall - prev[0], cpu - prev[1])
        prev = (wall, cpu)
    return out


_PROGRESS_MS = ("triggerExecution", "addBatch", "queryPlanning", "walCommit", "commitOffsets", "latestOffset")


def run_stream(spark, data: Path, contender: str, ratio: int, schema, fpt: int) -> dict:
    src = spark.readStream.schema(schema).option("maxFilesPerTrigger", fpt).parquet(str(data))
    if contender == "spark-window":
        q = spark_window(src.withWatermark("ts", f"{LAG_S} seconds"), ratio)
    elif contender == "spark-floor":
        q = spark_floor(src.withWatermark("ts", f"{LAG_S} seconds"))
    else:
        api = "transformWithStateInPandas" if contender == "jetspark-tws" else None
        engine = "native" if contender == "jetspark-native" else "auto"
        q = jetspark(src.withWatermark("watermark", "0 seconds"), ratio, api, engine)
    ckpt = tempfile.mkdtemp(prefix="bench-ckpt-")
    try:

        def go():
            sq = (
                q.writeStream.format("noop")
                .outputMode("append")
                .option("checkpointLocation", ckpt)
                .trigger(availableNow=True)
                .start()
            )
            sq.awaitTermination()
            if sq.exception() is not None:
                raise RuntimeError(str(sq.exception()))
            return sq.recentProgress

        run = timed_run(go)
        wall, cpu, progress = run["wall"], run["cpu"], run["out"]
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)
    data_batches = sum(1 for p in progress if p.get("numInputRows", 0) > 0)
    per_batch = {k: statistics.fmean(p["durationMs"].get(k, 0) for p in progress) for k in _PROGRESS_MS}
    ops_ = [o for p in progress for o in p.get("stateOperators", [])]
    for k in ("allUpdatesTimeMs", "commitTimeMs", "allRemovalsTimeMs"):
        per_batch[f"state.{k}"] = sum(o.get(k, 0) for o in ops_) / max(len(progress), 1)
    return {
        "wall": wall,
        "cpu": cpu,
        "batches": len(progress),
        "data_batches": data_batches,
        "ms_per_batch": 1000 * wall / max(data_batches, 1),
        "new_py_processes": run["new_py_processes"],
        "progress_ms_per_batch": per_batch,
    }


def check_equal(spark, data: Path, ratio: int) -> None:
    """Before timing: ours agrees with Spark's window() on this data (batch; checksums)."""
    from pyspark.sql import functions as F

    df = spark.read.parquet(str(data))
    a = jetspark(df.drop("watermark"), ratio)
    b = spark_window(df, ratio)
    ca = a.agg(F.count("*"), F.sum("n"), F.sum("total"), F.sum("peak")).first()
    cb = b.agg(F.count("*"), F.sum("n"), F.sum("total"), F.sum("peak")).first()
    close = all(abs(x - y) <= 1e-9 * abs(y) for x, y in zip(ca[2:], cb[2:], strict=True))
    if ca[0] != cb[0] or ca[1] != cb[1] or not close:
        raise SystemExit(f"results differ at ratio {ratio}: ours {ca} vs window() {cb}")


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--ratios", default="1,10,100")
    ap.add_argument("--modes", default="batch,stream", help="batch and/or stream (alias: streaming)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per contender and mode (median reported)")
    ap.add_argument(
        "--files-per-trigger", default="6,1", help="hours of events per micro-batch (streaming), comma list"
    )
    ap.add_argument(
        "--contenders",
        default="spark-window,spark-frames,spark-floor,jetspark",
        help="spark-frames runs in batch only; also: jetspark-tws (streaming on "
        "transformWithStateInPandas), jetspark-python (batch, engine='python': stage 1 in Python), "
        "jetspark-native (engine='native': Spark's aggregations only), "
        "floor-python (batch: the floor's cells through Python and back)",
    )
    ap.add_argument("--buckets", type=int, default=16, help="jetspark's state buckets (streaming)")
    ap.add_argument("--no-breakdown", action="store_true", help="skip the per-stage breakdown (batch)")
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args()
    global BUCKETS
    BUCKETS = args.buckets

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from jetspark.devtools.spark import local_session

    conf = {
        "spark.sql.shuffle.partitions": "4",
        # cheaper state commits, for every contender alike
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    }
    spark = local_session("bench-windowing", conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    data = Path(tempfile.mkdtemp(prefix="bench-windowing-"))
    results: list[dict] = []
    started = dt.datetime.now(dt.UTC)
    load_start = os.getloadavg()
    print("load average at the start: {:.2f} {:.2f} {:.2f}".format(*load_start), flush=True)
    try:
        generate(data, args.events, args.keys)
        schema = spark.read.parquet(str(data)).schema
        ratios = [int(r) for r in args.ratios.split(",")]
        contenders = args.contenders.split(",")
        modes = ["stream" if m == "streaming" else m for m in args.modes.split(",")]
        splits = [int(f) for f in args.files_per_trigger.split(",")]
        for ratio in ratios:
            if not args.no_check and "batch" in modes:
                check_equal(spark, data, ratio)
            runs = [(m, fpt) for m in modes for fpt in ([None] if m == "batch" else splits)]
            for mode, fpt in runs:
                batch_only = {"spark-frames", "jetspark-python", "floor-python"}
                skip = {"jetspark-tws"} if mode == "batch" else batch_only
                names = [c for c in contenders if c not in skip]
                label = mode if fpt is None else f"{mode} {HOURS // fpt}×{fpt}h"
                got: dict[str, list[dict]] = {c: [] for c in names}
                breakdowns: list[dict] = []
                for rep in range(args.repeat):
                    for c in names if rep % 2 == 0 else names[::-1]:
                        if mode == "batch":
                            r = run_batch(spark, data, c, ratio)
                        else:
                            r = run_stream(spark, data, c, ratio, schema, fpt)
                        r["load"] = load()
                        got[c].append(r)
                        extra = f" {r['ms_per_batch']:8.0f} ms/batch" if "ms_per_batch" in r else ""
                        n_py = r["new_py_processes"]
                        cold = f"  new Python processes {n_py}" if n_py else ""
                        print(f"ratio {ratio:>3} {label:16} {c:15} {r['wall']:7.2f} s  cpu {r['cpu']:6.2f} s"
                              f"{extra}  load {r['load']:.1f}{cold}", flush=True)  # fmt: skip
                    if mode == "batch" and "jetspark" in names and not args.no_breakdown:
                        b = batch_breakdown(spark, data, ratio)
                        breakdowns.append(b)
                        parts = ", ".join(f"{k} {w:.2f}/{c:.2f}" for k, (w, c) in b.items())
                        print(f"  jetspark stages (wall/cpu s): {parts}", flush=True)
                results.append(_summary(ratio, label, got, breakdowns, args.events))
                print(json.dumps(results[-1]), flush=True)
    finally:
        shutil.rmtree(data, ignore_errors=True)
    _report(args, results, started, load_start)


def _summary(ratio: int, label: str, got: dict[str, list[dict]], breakdowns: list[dict], events: int) -> dict:
    med = {c: _median(v, "wall") for c, v in got.items()}
    row: dict = {
        "ratio": ratio,
        "mode": label,
        "median_seconds": med,
        "best_seconds": {c: min(r["wall"] for r in v) for c, v in got.items()},
        "median_cpu_seconds": {c: _median(v, "cpu") for c, v in got.items()},
        "events_per_second": {c: events / s for c, s in med.items()},
        "load": [r["load"] for v in got.values() for r in v],
        "runs": got,
    }
    if "jetspark" in med:
        row["speedup"] = {f"vs {c}": med[c] / med["jetspark"] for c in med if c != "jetspark"}
    if "spark-floor" in med:
        if "spark-window" in med:
            row["ceiling_vs_window"] = med["spark-window"] / med["spark-floor"]
        if all("ms_per_batch" in r for v in got.values() for r in v):  # streaming: per micro-batch
            per = {c: _median(v, "ms_per_batch") for c, v in got.items()}
            row["median_ms_per_batch"] = per
            if "jetspark" in per:
                row["jetspark_over_floor"] = per["jetspark"] / per["spark-floor"]
        elif "jetspark" in med:
            row["jetspark_over_floor"] = med["jetspark"] / med["spark-floor"]
    if "floor-python" in med and "spark-floor" in med:
        # the most of the ceiling a Python stage 2 can reach: its two transfers alone
        row["python_transfers_of_ceiling"] = med["spark-floor"] / med["floor-python"]
    if breakdowns:
        row["jetspark_stages"] = {
            k: {"wall": statistics.median(b[k][0] for b in breakdowns),
                "cpu": statistics.median(b[k][1] for b in breakdowns)}
            for k in breakdowns[0]
        }  # fmt: skip
    return row


def _report(args, results: list[dict], started: dt.datetime, load_start: tuple) -> None:
    end = os.getloadavg()
    lines = [
        f"# bench_windowing — {started.isoformat(timespec='seconds')}",
        "",
        f"{args.events} events, {args.keys} keys, 24 h, slide 1 min; streaming micro-batches of "
        f"{args.files_per_trigger} h of events, {args.buckets} state buckets; "
        f"median of {args.repeat} alternating runs; "
        f"{os.cpu_count()} cores; load average (1/5/15 min) at the start "
        + "{:.2f}/{:.2f}/{:.2f}".format(*load_start)
        + ", at the end {:.2f}/{:.2f}/{:.2f}".format(*end),
        "",
        "| size/slide | mode | contender | median s | best s | CPU s | ms/micro-batch | events/s "
        "| jetspark speed-up |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for c, s in r["median_seconds"].items():
            sp = "" if c == "jetspark" else f"{r.get('speedup', {}).get(f'vs {c}', float('nan')):.2f}×"
            mpb = r.get("median_ms_per_batch", {}).get(c)
            lines.append(
                f"| {r['ratio']} | {r['mode']} | {c} | {s:.2f} | {r['best_seconds'][c]:.2f} | "
                f"{r['median_cpu_seconds'][c]:.2f} | {'' if mpb is None else f'{mpb:.0f}'} | "
                f"{r['events_per_second'][c]:,.0f} | {sp} |"
            )
    floored = [r for r in results if "ceiling_vs_window" in r or "jetspark_over_floor" in r]
    if floored:
        lines += [
            "",
            "Against the floor (batch: Spark's aggregation of the same aggregates per key and frame; "
            "streaming: Spark's tumbling count, same source and micro-batches, compared per micro-batch):",
            "",
            "| size/slide | mode | ceiling = window() / floor | jetspark vs window() | jetspark / ceiling "
            "| jetspark time / floor's |",
            "|---:|---|---:|---:|---:|---:|",
        ]
        for r in floored:
            ceil = r.get("ceiling_vs_window")
            sp = r.get("speedup", {}).get("vs spark-window")
            frac = sp / ceil if ceil and sp else None
            lines.append(
                f"| {r['ratio']} | {r['mode']} | {_fmt(ceil, '×')} | {_fmt(sp, '×')} | {_fmt(frac, '')} "
                f"| {_fmt(r.get('jetspark_over_floor'), '×')} |"
            )
    bounded = [r for r in results if "python_transfers_of_ceiling" in r]
    if bounded:
        lines += ["", "The floor's cells through Python and back (``floor-python``, no window work): "
                  "the most of the ceiling any Python stage 2 can reach:", ""]
        lines += [f"- size/slide {r['ratio']}, {r['mode']}: {r['python_transfers_of_ceiling']:.2f} "
                  f"(floor {r['median_seconds']['spark-floor']:.2f} s, floor-python "
                  f"{r['median_seconds']['floor-python']:.2f} s)" for r in bounded]
    cold = [(r, c, sum(run["new_py_processes"] > 0 for run in v), len(v))
            for r in results for c, v in r["runs"].items() if c.startswith("jetspark")]
    if any(n for _, _, n, _ in cold):
        lines += ["", "Runs that started new Python processes (Spark ends a worker idle for a minute; a new "
                  "one imports its modules before any work, so such a run is slower):", ""]
        lines += [f"- size/slide {r['ratio']}, {r['mode']}, {c}: {n} of {m}" for r, c, n, m in cold if n]
    staged = [r for r in results if "jetspark_stages" in r]
    if staged:
        lines += ["", "Where jetspark's time goes (batch; median increments, wall s / CPU s):", ""]
        for r in staged:
            stages = r["jetspark_stages"].items()
            parts = ", ".join(f"{k} {v['wall']:.2f} / {v['cpu']:.2f}" for k, v in stages)
            lines.append(f"- size/slide {r['ratio']}: {parts}")
    text = "\n".join(lines) + "\n"
    out = Path(__file__).resolve().parent / "reports"
    out.mkdir(exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    (out / f"windowing-{stamp}.md").write_text(text)
    (out / f"windowing-{stamp}.json").write_text(json.dumps(results, indent=2))
    print(text)
    groups = {f"size/slide {r['ratio']}, {r['mode']}": {c: [run["wall"] for run in v]
                                                         for c, v in r["runs"].items()} for r in results}
    runs_chart(out / f"windowing-{stamp}.png", f"Sliding windows: {args.events:,} events, {args.keys} keys",
               "seconds per run (bar: median, dots: runs; lower is better)", groups,
               f"{os.cpu_count()} cores, load average at the end {end[0]:.2f}")


def _fmt(x: float | None, unit: str) -> str:
    return "" if x is None else f"{x:.2f}{unit}"


if __name__ == "__main__":
    main()
