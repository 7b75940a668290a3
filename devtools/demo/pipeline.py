"""``jetspark demo``: the jetspark pipeline, end to end, on real services.

A 4-partition Kafka topic of vehicle positions (partition 1 runs 45 s behind in event time,
the last partition goes idle half-way, a few records are late and a few are not JSON) →
``jetkafka`` (per-partition watermarks, lag 5 s, idle timeout 2 s) → JSON parsing (malformed
records go to a dead-letter table) → ``window_aggregate``: 30-second windows sliding by 10
seconds per vehicle (count, mean speed, slope of speed over time) → ``jetjdbc`` in
``guarantee=exactly-once`` into PostgreSQL. Trigger.AvailableNow drives it: the first half of the
stream, then the second half (without the idle partition) on the same checkpoint.

At the end it compares the table (windows closed by the final watermark) with a naive
reference over the on-time events, counts what Spark's own ``withWatermark("timestamp",
lag)`` would have dropped on the same data (a second query over the whole topic, same
batch size: rows at or below Spark's global watermark of their batch), and writes a report
folder (``watermarks.png``, ``summary.md``, and the windows query's ``checkpoint/`` for
``jetspark inspect``). Tables stay in PostgreSQL for a look.

The terminal shows the demo's own lines only: Spark's log (JVM warnings, the Python workers'
stderr, Python warnings) goes to ``spark.log`` in the report folder, named at the end.

On a cluster: ``jetspark demo --master spark://…``, or ``spark-submit --master spark://…
scripts/jetspark_demo.py [options]`` (the executors need jetspark installed in the Python
that ``PYSPARK_PYTHON`` names).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

from jetspark.devtools.demo.events import LAG_S, SKEW_S, generate, produce, split_phases
from jetspark.devtools.demo.report import (
    SLIDE,
    WINDOW,
    Batch,
    batch_of,
    iso_ms,
    progress_line,
    reference_check,
    write_report,
)
from jetspark.listener import BatchProgress, WatermarkListener
from jetspark.redaction import redact_dsn

NEEDED = ("kafka", "postgres")
IDLE_TIMEOUT = "2 seconds"
SCHEMA = "vehicle string, speed double, lat double, lon double"


def _parsed(df):
    """Columns ``e`` (the parsed JSON) and ``valid``; heartbeat rows are never invalid."""
    from pyspark.sql import functions as F

    df = df.withColumn("e", F.from_json(F.col("value").cast("string"), SCHEMA))
    valid = F.col("e.vehicle").isNotNull() & F.col("e.speed").isNotNull()
    return df.withColumn("valid", F.col("heartbeat") | valid)


def _source_options(bootstrap: str, topic: str, per_batch: int, **extra: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": str(per_batch), **extra}


def _run(df_writer, name: str, listener: WatermarkListener | None = None) -> list[dict]:
    """Start with Trigger.AvailableNow, wait for the end (and for ``listener``'s last line)."""
    query = df_writer.trigger(availableNow=True).start()
    query.awaitTermination()
    if listener is not None and not listener.wait_terminated(query.runId, timeout_s=120):
        print(f"(the progress lines of {name} may be incomplete: the listener bus is slow)", flush=True)
    if query.exception() is not None:
        raise RuntimeError(f"query {name} failed: {query.exception()}")
    return [json.loads(p.json) for p in query.recentProgress]


def _master(asked: str | None) -> str | None:
    """The asked master; else spark-submit's (it starts the driver with a gateway); else local[2]."""
    if asked:
        return asked
    return None if os.environ.get("PYSPARK_GATEWAY_PORT") else "local[2]"


def run_demo(args: argparse.Namespace) -> int:
    import psycopg
    from pyspark.sql import functions as F

    from jetspark.datasources import read_kafka_stream
    from jetspark.devtools.services import ENV_VARS, acquire
    from jetspark.devtools.spark import local_session, output_to_log, refuse_connect_master
    from jetspark.windowing import ops, sliding, window_aggregate

    refuse_connect_master(args.master)  # before any service starts
    t_start = time.monotonic()
    if args.external:
        missing = [v for k, v in ENV_VARS.items() if k in NEEDED and not os.environ.get(v)]
        if missing:
            print(f"--external: set {', '.join(missing)} to the services to use")
            return 2
    records_n = args.rate * args.duration if args.rate else args.records
    services = acquire(NEEDED)  # JETSPARK_* variables first, then Docker, then local
    ep = services.endpoints
    print("services: " + ", ".join(f"{k} ({v})" for k, v in services.origin.items()))
    try:
        suffix = uuid.uuid4().hex[:8]
        topic = f"demo_positions_{suffix}"
        schema = f"{args.pg_schema}." if args.pg_schema else ""
        table, dead_table = f"{schema}demo_windows_{suffix}", f"{schema}demo_dead_letters_{suffix}"
        records = generate(records_n, args.partitions, args.duration, start_ms=args.start_ms)
        phases = split_phases(records, args.partitions)
        produced = phases[0] + phases[1]
        t0_ms = min(r.ts for r in records)
        per_batch = max(1, len(produced) // max(1, args.batches))
        lag = f"{LAG_S} seconds"
        folder = Path(args.report_dir or f"reports/demo-{datetime.now():%Y%m%d-%H%M%S}")
        with output_to_log(folder / "spark.log") as log:  # Spark's warnings, not the terminal's
            spark = local_session("jetspark-demo", master=_master(args.master))
            print(f"spark: {spark.sparkContext.master}")
            work = Path(tempfile.mkdtemp(prefix="jetspark-demo-"))

            # The pipeline: jetkafka → parse → sliding windows → jetjdbc exactly-once.
            source = read_kafka_stream(spark, _source_options(ep.kafka_bootstrap, topic, per_batch, **{
                "watermark.lag": lag, "watermark.idleTimeout": IDLE_TIMEOUT}))
            events = (_parsed(source).where("valid")
                      .select(F.col("e.vehicle").alias("vehicle"), "timestamp",
                              F.col("e.speed").alias("speed"),
                              ((F.unix_millis("timestamp") - t0_ms) / 1000).alias("t"), "heartbeat",
                              "watermark"))
            windows = window_aggregate(events, key="vehicle", time="timestamp", window=sliding(WINDOW, SLIDE),
                                       aggs={"n": ops.count(), "mean_speed": ops.mean("speed"),
                                             "slope": ops.linear_trend("t", "speed")})
            writer = (windows.writeStream.format("jetjdbc").option("url", ep.pg_dsn).option("table", table)
                      .option("guarantee", "exactly-once").option("createTable", "true")
                      .option("checkpointLocation", str(work / "windows")))
            batches: list[Batch] = []

            def line(progress: BatchProgress) -> str:  # the listener's line, in the demo's layout
                batches.append(batch_of(dict(progress.progress), topic))
                return progress_line(batches[-1], t0_ms, progress.slowest)

            listener = WatermarkListener(lambda text: print(text, flush=True), line=line)
            spark.streams.addListener(listener)
            for i, phase in enumerate(phases):
                produce(ep.kafka_bootstrap, topic, phase, args.partitions if i == 0 else 0)
                print(f"phase {i + 1}: produced {len(phase)} records to {topic}"
                      + (f" (partition {args.partitions - 1} now idle)" if i and args.partitions > 2 else ""))
                _run(writer, "jetspark-demo", listener)
            spark.streams.removeListener(listener)

            # Dead letters: the same stream's records that are not valid JSON, exactly once.
            raw = _parsed(spark.readStream.format("jetkafka").options(**_source_options(
                ep.kafka_bootstrap, topic, per_batch, **{"watermark.lateRecords": "keep"})).load())
            _run(raw.where("NOT valid").select("partition", "offset", "timestamp",
                                               F.col("value").cast("string").alias("raw_value"))
                 .writeStream.format("jetjdbc").option("url", ep.pg_dsn).option("table", dead_table)
                 .option("guarantee", "exactly-once").option("createTable", "true")
                 .option("checkpointLocation", str(work / "dead")), "jetspark-demo-dead-letters")

            # Spark's built-in watermark on the same rows: the global max event time minus the same
            # lag. A stateful operator after it would drop every row at or below the batch's watermark.
            seen: dict[int, list[int]] = {}
            builtin = (raw.where("valid AND NOT heartbeat").withWatermark("timestamp", lag)
                       .select(F.unix_millis("timestamp").alias("ts")))
            builtin_progress = _run(builtin.writeStream.foreachBatch(
                lambda df, batch_id: seen.__setitem__(batch_id, [r.ts for r in df.collect()]))
                .option("checkpointLocation", str(work / "builtin")), "spark-builtin")
            spark_wm = {p["batchId"]: iso_ms(p.get("eventTime", {}).get("watermark"))
                        for p in builtin_progress}
            spark_dropped = sum(ts <= spark_wm[b] for b, stamps in seen.items() if spark_wm.get(b)
                                for ts in stamps)
            spark.stop()
        checkpoint = folder / "checkpoint"  # the windows query's, for `jetspark inspect`
        shutil.rmtree(checkpoint, ignore_errors=True)
        shutil.move(work / "windows", checkpoint)
        shutil.rmtree(work, ignore_errors=True)  # the other checkpoints; the tables stay for a look

        until_ms = max(b.spark_watermark_ms for b in batches)
        with psycopg.connect(ep.pg_dsn) as conn:
            got = {(v, int(s.timestamp() * 1e6), int(e.timestamp() * 1e6)): (n, m, sl)
                   for v, s, e, n, m, sl in conn.execute(
                       f"SELECT vehicle, window_start, window_end, n, mean_speed, slope FROM {table}")}
            dead = conn.execute(f"SELECT count(*) FROM {dead_table}").fetchone()[0]
        equal, expected_n, diffs = reference_check(produced, got, until_ms, t0_ms)
        injected_late = sum(r.late for r in produced)
        malformed = sum(r.vehicle is None for r in produced)
        jet_late = sum(b.late for b in batches)
        ok = equal and jet_late == injected_late and dead == malformed
        summary = [
            f"rows in: {len(produced)} records ({len(produced) - injected_late - malformed} valid on time, "
            f"{injected_late} late, {malformed} malformed) from {args.partitions} partitions in "
            f"{len(batches)} batches; partition 1 {SKEW_S} s behind, partition {args.partitions - 1} "
            "idle after phase 1",
            f"late records dropped by jetspark: {jet_late} (injected: {injected_late}); "
            f"by Spark's built-in watermark (withWatermark('timestamp', '{lag}')) on the same data: "
            f"{spark_dropped}",
            f"malformed records: {dead} (produced: {malformed}) -> dead-letter table {dead_table}",
            f"windows written: {len(got)} to {table} (exactly-once); "
            f"reference windows closed by the final watermark: {expected_n}",
            f"table equals naive reference over the on-time events: {equal}",
        ]
        print("summary:")
        for line in summary:
            print("  " + line)
        for d in diffs:
            print("  difference: " + d)
        for path in write_report(folder, batches, t0_ms, summary):
            print(f"report: {path}")
        print(f"inspect: jetspark inspect {checkpoint} --kafka {ep.kafka_bootstrap} "
              f"--pg '{redact_dsn(ep.pg_dsn)}'")
        print(f"log: {log} (Spark's warnings, the Python workers' output)")
        print(f"check: {'PASSED' if ok else 'FAILED'}; done in {time.monotonic() - t_start:.1f} s")
        return 0 if ok else 1
    finally:
        if not args.keep_services:
            services.release()
