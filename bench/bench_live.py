"""Benchmark, live: a producer at a steady rate, the default trigger, latency per window.

A producer writes ``--rate`` events a second (event time = the wall clock, key one of
``--keys``, value ``{"v": <float>}``) into a fresh 4-partition topic. Two pipelines read it
in turn, each for ``--seconds``, with the default trigger (the next micro-batch as soon as
the last one ends), a 1-second watermark lag and the RocksDB state store:

* ``jetspark``: jetkafka (``read_kafka_stream``) → ``window_aggregate`` (count, sum) →
  jetjdbc ``guarantee=exactly-once`` (two-phase commit), on the Python engine
  (``engine="auto"``);
* ``jetspark-native`` (only when named in ``--contenders``): the same with
  ``engine="native"``: tumbling windows on Spark's streaming aggregation (other cases
  fail: only tumbling ones have that form);
* ``jetspark-tws`` (only when named in ``--contenders``): ``jetspark`` on
  ``transformWithStateInPandas`` (the default with early results; without them
  ``window_aggregate`` runs on ``applyInPandasWithState``);
* ``jetspark-cold`` (only when named in ``--contenders``): ``jetspark`` with
  ``spark.jetspark.warmPythonWorkers=false``: no Python workers warmed beside the build, so
  the start-up figures show what the warm-up saves;
* ``jetspark-noop`` (only when named in ``--contenders``): ``jetspark`` writing to Spark's
  ``noop`` sink: ``jetspark`` minus it is the two-phase sink's part of the micro-batch (its
  latency figures are not windows': ignore them);
* ``floor`` (only when named in ``--contenders``): ``jetspark`` with the window work taken
  out (see :func:`floor_query`): its micro-batch is what Spark's Python state API and
  Python data sources cost with these settings, the part of ``jetspark``'s micro-batch
  that jetspark's own code cannot remove (its latency figures are not windows': ignore
  them);
* ``floor-noop`` (only when named in ``--contenders``): ``floor`` writing to Spark's ``noop``
  sink: ``floor`` minus it is the sink's part of the stateful stage;
* ``floor-spark-source`` (only when named in ``--contenders``): ``floor-noop`` on Spark's own
  Kafka source (``withWatermark`` on the record timestamp): against ``spark-noop``, what
  Spark's Python state API costs alone; against ``floor-noop``, what jetkafka costs;
* ``spark-noop`` (only when named in ``--contenders``): ``spark`` writing to Spark's ``noop``
  sink (its latency figures are not windows': ignore them);
* ``spark``: ``format("kafka")`` → ``withWatermark`` → ``groupBy(window(…), key)`` (count,
  sum) → ``foreachBatch`` appending with Spark's JDBC writer.

Both write into a table with a column ``written_at timestamptz DEFAULT clock_timestamp()``;
a window's latency is ``written_at − window_end`` over the windows of the steady part of
the run (ends at least ``--warmup`` seconds after the query started, and at least the
window's length before the producer stopped; a run lasts ``--seconds``, and at least
warmup + window + 30 s so that a long window has such windows). For the two-phase sink
``written_at`` is the time of the task's COPY; the row becomes visible at the batch's
``COMMIT PREPARED``, a few ms to the batch's end later, so the figure is optimistic for
jetspark by that much.

Per micro-batch (steady part), from the query progress: the trigger's wall time and
Spark's own durations (``latestOffset`` = the source's planning, ``addBatch`` = the
stages, the state operator and the sink, ``walCommit``/``commitOffsets`` = the offset and
commit logs, ``queryPlanning``), and the state operator's update, removal and commit times
and custom metrics (RocksDB's commit phases); from Spark's SQL status store
(``batch_attribution.py``): each stage's wall and run time and every timing metric of the
plan's nodes (the Python nodes' boot, init and processing times, …). The summary prints
their medians side by side, contender by contender: where each micro-batch goes.

Start-up is reported apart from the steady figures: the time from the query's start to its
first final window in the table, and the latency of the windows that end in the first 30 s.

``--state-store`` chooses the state store for every contender alike: ``rocksdb`` (Spark's
RocksDB provider, without changelog checkpointing: Spark 4.3's default),
``rocksdb-changelog`` (with it) or ``hdfs`` (Spark's default HDFS-backed provider;
``transformWithStateInPandas`` cannot use it, so ``jetspark-tws`` needs another).

Cases (``--cases``, comma-separated names): ``tumbling-1s``, ``sliding-4s-1s``,
``sliding-60s-1s`` (at ``--keys``), ``sliding-60s-1s-20k`` (20,000 keys), and
``retained-10x`` (10× the keys and a 10× longer window of ``sliding-4s-1s``: 10× the
retained state at the same input rate). ``--shuffle-partitions`` sets Spark's
``spark.sql.shuffle.partitions`` for both (default 4); ``default`` leaves it unset, as a
user who tunes nothing does: Spark's own pipeline runs at Spark's 200, and jetspark's
``window_aggregate`` sets the default parallelism (2 here) for its stateful stage.

    .venv/bin/python bench/bench_live.py --cases tumbling-1s,sliding-4s-1s --repeat 3

``--early-results PERIOD`` measures windows while they fill instead: jetspark runs with
``window_aggregate(…, early_results=PERIOD)`` (provisional and final rows, appended by the
two-phase sink) and Spark with ``outputMode("update")`` (every updated window, appended by
``foreachBatch``). Per run: the rows written per second, and how soon a window first shows
in the table (``min(written_at) − window_start``; its first events carry about that event
time, so this is how soon an event shows in a row), over the windows starting in the
steady part.

Runs alternate between the contenders (order reversed every other repetition); the
median over runs is the headline figure, and the load average is printed with it. A
report (JSON) is written to ``bench/reports/``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import batch_attribution
import numpy as np
from kafka_bench import write_report
from plots import runs_chart

CONTENDERS = ("jetspark", "spark")
STATE_STORES = {
    "rocksdb": {"spark.sql.streaming.stateStore.providerClass":
                "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
                "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "false"},
    "rocksdb-changelog": {"spark.sql.streaming.stateStore.providerClass":
                          "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
                          "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"},
    "hdfs": {"spark.sql.streaming.stateStore.providerClass":
             "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"},
}
STARTUP_S = 30.0  # windows ending this soon after the start: the start-up figures
CORES = 2  # the local master's cores: the default parallelism with --shuffle-partitions default
LAG = "1 second"
PARTITIONS = 4


@dataclass(frozen=True)
class Case:
    name: str
    size_s: int
    slide_s: int
    keys: int


def cases(keys: int) -> dict[str, Case]:
    return {c.name: c for c in (
        Case("tumbling-1s", 1, 1, keys),
        Case("sliding-4s-1s", 4, 1, keys),
        Case("sliding-60s-1s", 60, 1, keys),
        Case("sliding-60s-1s-20k", 60, 1, 20_000),
        Case("retained-10x", 40, 1, keys * 10),
    )}


class Producer(threading.Thread):
    """``rate`` events/s in 10-ms ticks, timestamped with the wall clock, until stopped."""

    def __init__(self, bootstrap: str, topic: str, rate: int, keys: int) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Producer as KafkaProducer

        self.producer = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic, self.rate, self.keys = topic, rate, keys
        self.stop_event = threading.Event()
        self.sent = 0
        self.keys_bytes = [f"k{i}".encode() for i in range(keys)]

    def run(self) -> None:
        rng = np.random.default_rng(7)
        t0 = time.monotonic()
        while not self.stop_event.is_set():
            due = int((time.monotonic() - t0) * self.rate)
            now_ms = int(time.time() * 1000)
            for k in rng.integers(0, self.keys, max(due - self.sent, 0)):
                self.producer.produce(self.topic, key=self.keys_bytes[k], value=b'{"v": 1.5}',
                                      timestamp=now_ms)
                self.sent += 1
            self.producer.poll(0)
            time.sleep(0.01)
        self.producer.flush(30)


def make_table(dsn: str, table: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (key text, window_start timestamptz, window_end timestamptz, "
                     "n bigint, total double precision, final boolean, "
                     "written_at timestamptz DEFAULT clock_timestamp())")


def latencies(dsn: str, table: str, lo: float, hi: float) -> list[float]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            f"SELECT extract(epoch FROM written_at - window_end) FROM {table} "
            "WHERE window_end >= to_timestamp(%s) AND window_end <= to_timestamp(%s) "
            "AND final IS NOT FALSE", (lo, hi)).fetchall()  # final rows (jetspark's early results)
    return [float(r[0]) for r in rows]


def first_seen(dsn: str, table: str, lo: float, hi: float) -> tuple[list[float], int]:
    """Per window starting in [lo, hi]: its first row's ``written_at − window_start`` (s); and
    the rows written in [lo, hi]."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            f"SELECT extract(epoch FROM min(written_at) - window_start) FROM {table} "
            "WHERE window_start >= to_timestamp(%s) AND window_start <= to_timestamp(%s) "
            "GROUP BY key, window_start", (lo, hi)).fetchall()
        written = conn.execute(
            f"SELECT count(*) FROM {table} "
            "WHERE written_at >= to_timestamp(%s) AND written_at <= to_timestamp(%s)", (lo, hi)).fetchone()[0]
    return [float(r[0]) for r in rows], int(written)


def jetkafka_stream(spark, bootstrap: str, topic: str):
    """jetkafka on the topic, from its beginning (``read_kafka_stream``: watermark applied)."""
    from jetspark.datasources import read_kafka_stream

    return read_kafka_stream(spark, {
        "kafka.bootstrap.servers": bootstrap, "subscribe": topic, "startingOffsets": "earliest",
        "watermark.lag": LAG, "watermark.idleTimeout": "10 seconds"})


def jetspark_query(spark, bootstrap: str, topic: str, case: Case, dsn: str, table: str, ck: str, args,
                   engine: str = "auto", sink: str = "jetjdbc"):
    from pyspark.sql import functions as F

    from jetspark.windowing import ops, sliding, window_aggregate

    src = jetkafka_stream(spark, bootstrap, topic)
    events = src.select(F.col("key").cast("string").alias("key"), "timestamp",
                        F.get_json_object(F.col("value").cast("string"), "$.v").cast("double").alias("v"),
                        "watermark", "heartbeat")
    extra = {"state_api": args.state_api, "engine": engine}
    extra |= {"buckets": args.buckets} if args.buckets else {}
    if args.early_results:
        extra["early_results"] = args.early_results
    windows = window_aggregate(events, key="key", time="timestamp",
                               window=sliding(f"{case.size_s} seconds", f"{case.slide_s} seconds"),
                               aggs={"n": ops.count(), "total": ops.sum_("v")}, **extra)
    if sink == "noop":
        return windows.writeStream.format("noop").option("checkpointLocation", ck).start()
    return (windows.writeStream.format("jetjdbc").option("url", dsn).option("table", table)
            .option("guarantee", "exactly-once").option("checkpointLocation", ck).start())


def jetspark_noop_query(spark, bootstrap: str, topic: str, case: Case, dsn: str, table: str, ck: str, args):
    return jetspark_query(spark, bootstrap, topic, case, dsn, table, ck, args, sink="noop")


def spark_kafka_stream(spark, bootstrap: str, topic: str):
    """Spark's own Kafka source on the topic, from its beginning."""
    return (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest").load())


def spark_query(spark, bootstrap: str, topic: str, case: Case, dsn: str, table: str, ck: str, args,
                sink: str = "jdbc"):
    from pyspark.sql import functions as F

    src = spark_kafka_stream(spark, bootstrap, topic)
    events = src.select(F.col("key").cast("string").alias("key"), "timestamp",
                        F.get_json_object(F.col("value").cast("string"), "$.v").cast("double").alias("v"))
    w = F.window("timestamp", f"{case.size_s} seconds", f"{case.slide_s} seconds")
    windows = (events.withWatermark("timestamp", LAG).groupBy(w.alias("w"), "key")
               .agg(F.count(F.lit(1)).alias("n"), F.sum("v").alias("total"))
               .select("key", F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"),
                       "n", "total"))
    from jetspark.devtools.services.postgres import jdbc_url as to_jdbc

    jdbc_url, props = to_jdbc(dsn)

    def append(batch, _batch_id):
        batch.write.jdbc(jdbc_url, table, mode="append", properties=props)

    mode = "update" if args.early_results else "append"
    if sink == "noop":
        return windows.writeStream.outputMode(mode).format("noop").option("checkpointLocation", ck).start()
    return windows.writeStream.outputMode(mode).foreachBatch(append).option("checkpointLocation", ck).start()


def jetspark_tws_query(spark, bootstrap: str, topic: str, case: Case, dsn: str, table: str, ck: str, args):
    """``jetspark`` on ``state_api="transformWithStateInPandas"``, whatever ``--state-api`` says."""
    return jetspark_query(spark, bootstrap, topic, case, dsn, table, ck,
                          argparse.Namespace(**{**vars(args), "state_api": "transformWithStateInPandas"}))


def jetspark_native_query(spark, bootstrap: str, topic: str, case: Case, dsn: str, table: str, ck: str, args):
    return jetspark_query(spark, bootstrap, topic, case, dsn, table, ck, args, engine="native")


def floor_query(spark, bootstrap: str, topic: str, case: Case, dsn: str, table: str, ck: str, args,
                sink: str = "jetjdbc", source: str = "jetkafka"):
    """The pipeline of ``jetspark`` with no window work: jetkafka → its buckets (16, or
    ``--buckets``) → ``applyInPandasWithState`` with an event-time timeout
    (``window_aggregate``'s default state API; RocksDB) → jetjdbc two-phase. Each bucket
    reads its state (a count), writes it back, sets its timer one second past the watermark
    (as a bucket with an open window does) and emits one row (window_start = window_end = the
    micro-batch's processing time), so what the micro-batch costs is Spark's Python state API
    and Python data-source machinery at this many shuffle partitions. ``source="kafka"``:
    Spark's own Kafka source instead (the watermark ``withWatermark("timestamp", LAG)``, as
    Spark's contender has it), so that only the state API is Python."""
    import pandas as pd
    from pyspark.sql import functions as F

    from jetspark.windowing.api import DEFAULT_BUCKETS
    from jetspark.windowing.partitions import choose_stateful_partitions

    choose_stateful_partitions(spark)  # as window_aggregate does, for --shuffle-partitions default

    def count_per_bucket(key, frames, state):
        n = sum(len(f) for f in frames)
        got = state.get if state.exists else (0,)
        if state.hasTimedOut and n == 0:
            state.remove()
        else:
            state.update((got[0] + n,))
            state.setTimeoutTimestamp(state.getCurrentWatermarkMs() + 1000)
        now = pd.Timestamp.now(tz="UTC").tz_localize(None)
        yield pd.DataFrame({"key": [str(key[0])], "window_start": [now], "window_end": [now],
                            "n": [n], "total": [0.0]})

    if source == "kafka":
        src = (spark_kafka_stream(spark, bootstrap, topic)
               .withColumn("watermark", F.col("timestamp")).withWatermark("watermark", LAG))
    else:
        src = jetkafka_stream(spark, bootstrap, topic).filter(~F.col("heartbeat"))
    bucket = F.pmod(F.xxhash64(F.col("key").cast("string")), F.lit(args.buckets or DEFAULT_BUCKETS))
    # the event-time timeout needs the watermark's column
    rows = src.select(bucket.alias("bucket"), "timestamp", "watermark")
    out = rows.groupBy("bucket").applyInPandasWithState(
        count_per_bucket, "key string, window_start timestamp, window_end timestamp, n bigint, total double",
        "n bigint", "append", "EventTimeTimeout")
    if sink == "noop":
        return out.writeStream.format("noop").option("checkpointLocation", ck).start()
    return (out.writeStream.format("jetjdbc").option("url", dsn).option("table", table)
            .option("guarantee", "exactly-once").option("checkpointLocation", ck).start())


def floor_noop_query(spark, bootstrap: str, topic: str, case: Case, dsn: str, table: str, ck: str, args):
    return floor_query(spark, bootstrap, topic, case, dsn, table, ck, args, sink="noop")


def floor_spark_source_query(spark, bootstrap: str, topic: str, case: Case, dsn: str, table: str, ck: str,
                             args):
    return floor_query(spark, bootstrap, topic, case, dsn, table, ck, args, sink="noop", source="kafka")


def spark_noop_query(spark, bootstrap: str, topic: str, case: Case, dsn: str, table: str, ck: str, args):
    return spark_query(spark, bootstrap, topic, case, dsn, table, ck, args, sink="noop")


STARTERS = {"jetspark": jetspark_query, "jetspark-cold": jetspark_query, "spark": spark_query,
            "jetspark-native": jetspark_native_query, "jetspark-noop": jetspark_noop_query,
            "jetspark-tws": jetspark_tws_query,
            "floor": floor_query, "floor-noop": floor_noop_query,
            "floor-spark-source": floor_spark_source_query, "spark-noop": spark_noop_query}
DURATION_KEYS = ("triggerExecution", "latestOffset", "getBatch", "queryPlanning", "addBatch", "walCommit",
                 "commitOffsets")


def one_run(spark, endpoints, contender: str, case: Case, args, workdir: Path) -> dict:
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap, dsn = endpoints.kafka_bootstrap, endpoints.pg_dsn
    topic = f"live_{uuid.uuid4().hex[:8]}"
    table = f"live_{contender.replace('-', '_')}_{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)
    make_table(dsn, table)
    if args.shuffle_partitions == "default":  # what a user who tunes nothing has
        spark.conf.unset("spark.sql.shuffle.partitions")
    else:
        spark.conf.set("spark.sql.shuffle.partitions", args.shuffle_partitions)
    for key in STATE_STORES["rocksdb-changelog"]:
        spark.conf.unset(key)
    from jetspark.warm_workers import CONF as WARM_WORKERS

    spark.conf.set(WARM_WORKERS, "false" if contender == "jetspark-cold" else "true")
    for key, value in STATE_STORES[args.state_store].items():
        spark.conf.set(key, value)
    producer = Producer(bootstrap, topic, args.rate, case.keys)
    producer.start()
    started = time.time()
    query = STARTERS[contender](spark, bootstrap, topic, case, dsn, table, str(workdir / f"ck-{table}"), args)
    start_call_s = time.time() - started  # building the query and start(): before micro-batch 0
    try:
        while time.time() - started < run_seconds(case, args):
            if query.exception() is not None:
                raise RuntimeError(f"{contender}: {query.exception()}")
            time.sleep(0.5)
        stopped = time.time()
        lo, hi = started + args.warmup, stopped - case.size_s - 3
        lat = latencies(dsn, table, lo, hi)
        startup = _startup(dsn, table, started)
        seen, written = first_seen(dsn, table, lo, stopped - 3) if args.early_results else ([], 0)
    finally:
        query.stop()
        producer.stop_event.set()
        producer.join()
        admin.delete_topics([topic])
    steady = [p for p in query.recentProgress
              if _epoch(p["timestamp"]) >= started + args.warmup and _epoch(p["timestamp"]) <= stopped]
    recorded = batch_attribution.per_batch(spark, str(query.runId))
    per_batch = [batch_attribution.state_operator(p) | recorded.get(p["batchId"], {})
                 | {f"duration.{k}": float(v) for k, v in p["durationMs"].items()} for p in steady]
    early = ({"first_seen": _dist(seen), "rows_per_s": written / max(stopped - 3 - lo, 1e-9)}
             if args.early_results else {})
    return {"contender": contender, "case": case.name, "windows": len(lat),
            "latency": _dist(lat), "batches": len(steady), **early,
            "batch_ms": _median([p["durationMs"].get("triggerExecution", 0) for p in steady]),
            "breakdown_ms": {k: _median([p["durationMs"].get(k, 0) for p in steady]) for k in DURATION_KEYS},
            "state_ms": _state(steady), "rows_per_batch": _median([p["numInputRows"] for p in steady]),
            "attribution_ms": {k: _median([b.get(k, 0.0) for b in per_batch])
                               for k in sorted({k for b in per_batch for k in b})},
            "startup": startup | {
                "start_call_s": start_call_s,
                "first_batches": [_first_batch(p, started) for p in query.recentProgress[:3]]}}


def _first_batch(progress: dict, started: float) -> dict[str, float]:
    """A start-up micro-batch: when it began (s after the start) and where its time went (ms)."""
    return {"batch": progress["batchId"], "at_s": _epoch(progress["timestamp"]) - started,
            "rows": progress["numInputRows"],
            **{k: float(progress["durationMs"].get(k, 0)) for k in DURATION_KEYS}}


def _startup(dsn: str, table: str, started: float) -> dict[str, float]:
    """Time from the query's start to its first final window in the table, and the latency
    of the windows ending in the first ``STARTUP_S`` seconds."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        first = conn.execute(f"SELECT extract(epoch FROM min(written_at)) FROM {table} "
                             "WHERE final IS NOT FALSE").fetchone()[0]
    early = latencies(dsn, table, started, started + STARTUP_S)
    return {"first_window_s": float("nan") if first is None else float(first) - started,
            **{f"startup_{q}": v for q, v in _dist(early).items()}}


def run_seconds(case: Case, args) -> float:
    """``--seconds``, and at least warmup + window + 30 s: windows ending in the steady part,
    with a window's length (and 30 s) of margin before the stop, so slow windows are not cut off."""
    return max(args.seconds, args.warmup + case.size_s + 30)


def _epoch(ts: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def _dist(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {q: float("nan") for q in ("p50", "p90", "p99", "max")}
    a = np.asarray(xs)
    return {"p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)),
            "p99": float(np.percentile(a, 99)), "max": float(a.max())}


def _state(progress: list[dict]) -> dict[str, float]:
    ops = [p["stateOperators"][0] for p in progress if p.get("stateOperators")]
    return {"update": _median([o.get("allUpdatesTimeMs", 0) for o in ops]),
            "commit": _median([o.get("commitTimeMs", 0) for o in ops]),
            "rows_total": _median([o.get("numRowsTotal", 0) for o in ops])}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="tumbling-1s,sliding-4s-1s,sliding-60s-1s-20k,retained-10x")
    p.add_argument("--rate", type=int, default=2000, help="events per second")
    p.add_argument("--keys", type=int, default=50)
    p.add_argument("--seconds", type=float, default=45.0, help="length of one run")
    p.add_argument("--warmup", type=float, default=12.0, help="seconds left out at the start of a run")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--shuffle-partitions", default="4",
                   help="N, or 'default': left unset (Spark's 200; window_aggregate then chooses)")
    p.add_argument("--contenders", default=",".join(CONTENDERS))
    p.add_argument("--state-api", default=None, help="window_aggregate's state_api (default: its own choice)")
    p.add_argument("--state-store", choices=sorted(STATE_STORES), default="rocksdb",
                   help="the state store of every contender")
    p.add_argument("--buckets", type=int, default=None, help="window_aggregate's buckets (and the floors')")
    p.add_argument("--conf", action="append", default=[], help="KEY=VALUE: a Spark setting for both")
    p.add_argument("--early-results", default=None,
                   help="PERIOD: jetspark's early_results against Spark's update output mode")
    args = p.parse_args()

    from jetspark.devtools.maven import POSTGRES_JDBC, SPARK_KAFKA, spark_jars_conf
    from jetspark.devtools.services import acquire
    from jetspark.devtools.spark import local_session

    all_cases = cases(args.keys)
    chosen = [all_cases[c] for c in args.cases.split(",")]
    contenders = args.contenders.split(",")
    endpoints = acquire(["kafka", "postgres"]).endpoints
    tuned = args.shuffle_partitions != "default"
    spark = local_session("bench-live", master=f"local[{CORES}]",
                          shuffle_partitions=int(args.shuffle_partitions) if tuned else CORES,
                          conf={**spark_jars_conf([*POSTGRES_JDBC, *SPARK_KAFKA]),
                                "spark.sql.streaming.numRecentProgressUpdates": "10000",
                                **dict(kv.split("=", 1) for kv in args.conf)})
    workdir = Path(tempfile.mkdtemp(prefix="bench-live-"))
    results: list[dict] = []
    try:
        for case in chosen:
            for i in range(args.repeat):
                for contender in contenders if i % 2 == 0 else contenders[::-1]:
                    r = one_run(spark, endpoints, contender, case, args, workdir)
                    results.append(r)
                    lat = r["latency"]
                    if args.early_results:
                        seen = r["first_seen"]
                        print(f"{case.name:20s} run {i + 1} {contender:15s} first seen "
                              f"p50 {seen['p50']:.2f} s p99 {seen['p99']:.2f} s | "
                              f"{r['rows_per_s']:.0f} rows/s | batch {r['batch_ms']:.0f} ms "
                              f"({r['batches']} batches)", flush=True)
                        continue
                    up = r["startup"]
                    print(f"{case.name:20s} run {i + 1} {contender:15s} latency p50 {lat['p50']:.2f} s "
                          f"p99 {lat['p99']:.2f} s max {lat['max']:.2f} s | start-up: first window "
                          f"{up['first_window_s']:.1f} s, first {STARTUP_S:.0f} s p50 "
                          f"{up['startup_p50']:.2f} s p99 {up['startup_p99']:.2f} s"
                          f" | batch {r['batch_ms']:.0f} ms "
                          f"({r['batches']} batches, {r['rows_per_batch']:.0f} rows) | "
                          f"{json.dumps(r['breakdown_ms'])} state {json.dumps(r['state_ms'])}", flush=True)
                    print(f"{'':20s} start-up: start() {up['start_call_s']:.1f} s; " + "; ".join(
                        f"batch {b['batch']} at {b['at_s']:.1f} s: {b['triggerExecution']:.0f} ms "
                        f"(planning {b['queryPlanning']:.0f}, addBatch {b['addBatch']:.0f}, {b['rows']} rows)"
                        for b in up["first_batches"]), flush=True)
        summary = (_early_summary(results, chosen, contenders) if args.early_results
                   else _summary(results, chosen, contenders))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    load = os.getloadavg()
    print(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    report = write_report("live", {"args": vars(args), "runs": results, "summary": summary,
                                   "load_average": load})
    groups = {f"{case.name} {q}": {c: [r["latency"][q] for r in results
                                      if r["case"] == case.name and r["contender"] == c and "latency" in r]
                                  for c in contenders}
              for case in chosen for q in ("p50", "p99")}
    if any(v for g in groups.values() for v in g.values()):
        runs_chart(report.with_suffix(".png"), f"Live windows: latency per window, {args.rate:,} events/s",
                   "seconds from window end to the row in PostgreSQL (bar: median, dots: runs)", groups,
                   f"{os.cpu_count()} cores, load average at the end {load[0]:.2f}")


def _medians(results: list[dict], case: Case, contender: str, paths: dict[str, tuple[str, ...]]) -> dict:
    """Per name, the median over the contender's runs of ``case`` of the value at its path."""
    runs = [r for r in results if r["case"] == case.name and r["contender"] == contender]

    def at(run: dict, path: tuple[str, ...]):
        for part in path:
            run = run[part]
        return run

    return {name: _median([at(r, path) for r in runs]) for name, path in paths.items()}


def _summary(results: list[dict], chosen: list[Case], contenders: list[str]) -> dict:
    out: dict = {}
    print("\nmedians of the runs:")
    for case in chosen:
        row = {}
        for c in contenders:
            row[c] = _medians(results, case, c, {q: ("latency", q) for q in ("p50", "p90", "p99", "max")}
                              | {"batch_ms": ("batch_ms",), "first_window_s": ("startup", "first_window_s"),
                                 "startup_p50": ("startup", "startup_p50"),
                                 "startup_p99": ("startup", "startup_p99")})
            print(f"  {case.name:20s} {c:15s} p50 {row[c]['p50']:.2f} s  p90 {row[c]['p90']:.2f} s  "
                  f"p99 {row[c]['p99']:.2f} s  max {row[c]['max']:.2f} s  batch {row[c]['batch_ms']:.0f} ms  "
                  f"| start-up: first window {row[c]['first_window_s']:.1f} s, first {STARTUP_S:.0f} s "
                  f"p50 {row[c]['startup_p50']:.2f} s p99 {row[c]['startup_p99']:.2f} s")
        _print_attribution(results, case, contenders)
        for c in (c for c in contenders if c != "spark" and "spark" in row):
            a, b = row[c], row["spark"]
            diff = a["batch_ms"] - b["batch_ms"]
            print(f"  {case.name:20s} spark/{c} latency p50 {b['p50'] / a['p50']:.2f}x "
                  f"p99 {b['p99'] / a['p99']:.2f}x; batch {c} − spark {diff:+.0f} ms")
        if "spark" in row or "spark-noop" in row:
            _print_goals(case, row)
        out[case.name] = row
    return out


#: The live goals, against Spark's contender: jetspark's p50 and p99 latency at most these
#: fractions of Spark's, its micro-batch at most Spark's plus this many ms.
GOAL_P50, GOAL_P99, GOAL_BATCH_MS = 0.8, 0.85, 50.0
#: Contenders whose micro-batch is a part of jetspark's pipeline (its latency figures are not
#: windows'): if one of them already exceeds Spark's + GOAL_BATCH_MS, it blocks the goal.
PARTS = ("floor-spark-source", "floor-noop", "floor", "jetspark-noop")


def _print_goals(case: Case, row: dict) -> None:
    """Each goal met or missed, and the part of the pipeline that already misses the
    micro-batch goal on its own (the figure that blocks it)."""
    if "jetspark" in row and "spark" in row:
        j, spark = row["jetspark"], row["spark"]
        verdicts = [("p50", j["p50"] / spark["p50"], GOAL_P50), ("p99", j["p99"] / spark["p99"], GOAL_P99)]
        parts = [f"{name} {value:.2f}x of Spark's (goal <= {goal}x: {'met' if value <= goal else 'missed'})"
                 for name, value, goal in verdicts]
        diff = j["batch_ms"] - spark["batch_ms"]
        parts.append(f"micro-batch {diff:+.0f} ms against Spark's (goal <= +{GOAL_BATCH_MS:.0f}: "
                     f"{'met' if diff <= GOAL_BATCH_MS else 'missed'})")
        print(f"  {case.name:20s} goals: " + "; ".join(parts))
    for part in (p for p in PARTS if p in row):
        # a part without a sink against Spark's pipeline without one, when it ran
        ref = "spark-noop" if part != "floor" and "spark-noop" in row else "spark"
        if ref not in row:
            continue
        diff = row[part]["batch_ms"] - row[ref]["batch_ms"]
        if diff > GOAL_BATCH_MS:
            print(f"  {case.name:20s} blocks the micro-batch goal: {part} alone is {ref} {diff:+.0f} ms "
                  f"({row[part]['batch_ms']:.0f} against {row[ref]['batch_ms']:.0f} ms)")


def _print_attribution(results: list[dict], case: Case, contenders: list[str], top: int = 30) -> None:
    """Where the micro-batch goes, per contender side by side: the medians over runs of each
    recorded figure (ms per micro-batch), the largest first."""
    names = sorted({k for r in results if r["case"] == case.name for k in r.get("attribution_ms", {})})
    def median_of(c: str, k: str) -> float:  # a figure a contender's plan lacks counts as 0 ms
        return _median([r["attribution_ms"].get(k, 0.0) for r in results
                        if r["case"] == case.name and r["contender"] == c])

    table = {c: {k: median_of(c, k) for k in names} for c in contenders}
    present = [k for k in names if any(table[c].get(k, 0) == table[c].get(k, 0) and table[c].get(k, 0) > 0.5
                                       for c in contenders)]
    present.sort(key=lambda k: -max(v if v == v else 0 for v in (table[c].get(k, 0) for c in contenders)))
    width = max((len(k) for k in present[:top]), default=10)
    print(f"  {case.name}: where a micro-batch goes (ms, medians)")
    print("    " + " " * width + "".join(f"{c:>16s}" for c in contenders))
    for k in present[:top]:
        print(f"    {k:{width}s}" + "".join(f"{table[c].get(k, float('nan')):16.0f}" for c in contenders))


def _early_summary(results: list[dict], chosen: list[Case], contenders: list[str]) -> dict:
    out: dict = {}
    print("\nmedians of the runs (early results):")
    for case in chosen:
        row = {}
        for c in contenders:
            row[c] = _medians(results, case, c, {"first_seen_p50": ("first_seen", "p50"),
                                                 "first_seen_p99": ("first_seen", "p99"),
                                                 "rows_per_s": ("rows_per_s",), "batch_ms": ("batch_ms",)})
            print(f"  {case.name:20s} {c:15s} first seen p50 {row[c]['first_seen_p50']:.2f} s  "
                  f"p99 {row[c]['first_seen_p99']:.2f} s  {row[c]['rows_per_s']:.0f} rows/s  "
                  f"batch {row[c]['batch_ms']:.0f} ms")
        out[case.name] = row
    return out


if __name__ == "__main__":
    main()
