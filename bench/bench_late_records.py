"""How many records a default windowed query leaves out when producers write small disorder.

Not a timing: a count, the same on any machine. A topic of ``--records`` records in
``--partitions`` partitions, ``--rate`` records per second of event time, each stamped up to
``--jitter-ms`` behind its place (as producers that batch from several threads, or set
timestamps themselves, write them; default 50–450 ms). The same micro-batches
(``maxOffsetsPerTrigger``: ``--batch-ms`` of event time each, ``Trigger.AvailableNow``) are read
by

- Spark: ``format("kafka")`` + ``withWatermark("timestamp", <lag>)`` + ``window()`` count (Spark's
  contender first);
- plain jetkafka: ``format("jetkafka")`` with no option — the rows Spark's source gives, none
  blanked (checked: every payload is there);
- jetspark: ``read_kafka_stream`` with ``watermark.lag`` = <lag> + ``window_aggregate`` count,

with a tumbling window of ``--window`` and each lag of ``--lags``. A record is left out when
the window it belongs to had already been emitted when it was read (a last record per
partition, a minute later, closes every window of the data). Prints, per lag, the
records each windowed query counted and left out; a report goes to ``bench/reports/``.

    .venv/bin/python bench/bench_late_records.py [--records 4000] [--partitions 2] [--lags 0,500]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

from kafka_bench import ROOT, kafka_bootstrap, write_report


def produce(bootstrap: str, topic: str, records: int, partitions: int, rate: int, jitter: tuple[int, int],
            phase_ms: int, seed: int = 7) -> None:
    """Recent event times (Kafka's retention deletes records stamped long ago), starting
    ``phase_ms`` after a whole second (micro-batches of a live query end anywhere in a window)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)
    rng = random.Random(seed)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    step = 1000 / rate
    base_ts = (int(time.time()) - records // rate - 120) * 1000 + phase_ms
    for i in range(records):
        ts = base_ts + int(i * step) - rng.randint(*jitter)
        producer.produce(topic, b"%d" % i, b"k%d" % (i % 16), partition=i % partitions, timestamp=ts)
        producer.poll(0)
    end = base_ts + int(records * step) + 60_000  # one record per partition closes every window
    for partition in range(partitions):
        producer.produce(topic, b"close", b"close", partition=partition, timestamp=end)
    producer.flush(60)


def run(df, checkpoint: Path) -> list:
    """The rows a ``Trigger.AvailableNow`` query writes (printing how many micro-batches)."""
    rows: list = []
    query = (df.writeStream.foreachBatch(lambda b, _i: rows.extend(b.collect()))
             .outputMode("append").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    print(f"  {len(query.recentProgress)} micro-batches, {len(rows)} rows out", flush=True)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=4_000)
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--rate", type=int, default=200, help="records per second of event time")
    p.add_argument("--jitter-ms", default="50,450", help="min,max ms a record is stamped behind its place")
    p.add_argument("--batch-ms", type=int, default=500, help="event time per micro-batch")
    p.add_argument("--phase-ms", type=int, default=250,
                   help="where in a second the batches end (aligned with the windows, none is late)")
    p.add_argument("--window", default="1 second")
    p.add_argument("--lags", default="0,500", help="watermark lags to try, ms")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    from pyspark.sql import functions as F
    from pyspark_jetkafka import DefaultSource

    from jetspark.datasources import read_kafka_stream
    from jetspark.devtools.maven import SPARK_KAFKA, spark_jars_conf
    from jetspark.devtools.spark import local_session
    from jetspark.windowing import ops, tumbling, window_aggregate

    bootstrap = kafka_bootstrap("native")
    topic = f"late_{uuid.uuid4().hex[:8]}"
    jitter = tuple(int(x) for x in args.jitter_ms.split(","))
    produce(bootstrap, topic, args.records, args.partitions, args.rate, jitter,  # type: ignore[arg-type]
            args.phase_ms)
    per_batch = max(1, args.rate * args.batch_ms // 1000)
    base = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": str(per_batch)}
    spark = local_session("bench-late-records", conf=spark_jars_conf(SPARK_KAFKA))
    spark.dataSource.register(DefaultSource)
    work = Path(tempfile.mkdtemp(prefix="bench-late-"))
    results: dict = {}
    try:
        plain = run(spark.readStream.format("jetkafka").options(**base).load(), work / "plain")
        payloads = sum(r.value is not None for r in plain)
        print(f"plain format('jetkafka'), no option: {len(plain)} rows, {payloads} payloads "
              f"of {args.records + args.partitions} records", flush=True)
        results["plain_jetkafka"] = {"rows": len(plain), "payloads": payloads}
        for lag in (int(x) for x in args.lags.split(",")):
            spark_df = (spark.readStream.format("kafka").options(**base).load()
                        .withWatermark("timestamp", f"{lag} milliseconds")
                        .groupBy(F.window("timestamp", args.window)).count())
            spark_n = sum(r["count"] for r in run(spark_df, work / f"spark-{lag}"))
            events = read_kafka_stream(spark, {**base, "watermark.lag": f"{lag} ms"}, metrics_name=None)
            ours = window_aggregate(events.withColumn("k", F.lit("all")), key="k", time="timestamp",
                                    window=tumbling(args.window), aggs={"n": ops.count()})
            ours_n = sum(r["n"] for r in run(ours, work / f"ours-{lag}"))
            results[f"lag_{lag}ms"] = {"spark_left_out": args.records - spark_n,
                                       "jetspark_left_out": args.records - ours_n}
            print(f"lag {lag} ms: of {args.records} records, Spark's window() left out "
                  f"{args.records - spark_n}, jetspark's window_aggregate {args.records - ours_n}",
                  flush=True)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    write_report("late-records", {"records": args.records, "partitions": args.partitions, "rate": args.rate,
                                  "jitter_ms": jitter, "batch_ms": args.batch_ms, "phase_ms": args.phase_ms,
                                  "window": args.window,
                                  "results": results, "when_unix": time.time()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
