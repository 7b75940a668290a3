"""Benchmark: a chained pipeline's input — a topic written transactionally — read by jetkafka
and by Spark's Kafka source (``kafka.isolation.level=read_committed``).

The topic (default 5 million committed records of ~100 bytes, 8 partitions; created and
filled once, reused by later runs with the same size) is written by jetkafka's sink in
``exactly-once`` mode (one Kafka transaction per sink task: commit markers in every
partition), in ``--writes`` batch writes; between them a transactional producer writes
records it aborts (``--aborted`` per write, spread over the partitions). Such offsets —
markers and aborted records — make Kafka's ListOffsets(max timestamp) useless to jetkafka's
driver, which then reads each batch's range for its greatest timestamp (through the native
reader when it is built).

Both sources read the topic from earliest to a ``noop`` sink with
``Trigger.AvailableNow`` in one Spark session, alternating which goes first; the best of
``--repeat`` runs of each is reported as committed records per second, with their ratio.

    .venv/bin/python bench/bench_jetkafka_chained.py [--records 5000000] [--partitions 8]
        [--writes 10] [--aborted 20000] [--repeat 2] [--reader native|confluent]

Endpoint: ``JETSPARK_KAFKA_BOOTSTRAP`` or jetspark's service discovery. A report goes to
``bench/reports/``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent


def _offsets_total(bootstrap: str, topic: str, partitions: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "jetbench-probe"})
    total = 0
    for p in range(partitions):
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        total += high - low
    consumer.close()
    return total


def _abort_some(bootstrap: str, topic: str, partitions: int, n: int, value: bytes) -> None:
    """``n`` records in one transaction that is then aborted."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50,
                         "transactional.id": f"jetbench-abort-{uuid.uuid4().hex}"})
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(n):
        while True:
            try:
                producer.produce(topic, b"aborted-%012d" % i + value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(300)
    producer.abort_transaction(60)


def ensure_topic(spark, bootstrap: str, records: int, partitions: int, value_bytes: int, writes: int,
                 aborted: int) -> str:
    """The transactional topic, written on first use (an existing one is checked by the reads:
    they must see exactly ``records`` rows)."""
    topic = f"jetbench_tx_{records}_{partitions}_{value_bytes}_{writes}_{aborted}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    exists = topic in admin.list_topics(timeout=30).topics
    if exists and _offsets_total(bootstrap, topic, partitions) > records:  # records, markers, aborted
        return topic
    if exists:
        admin.delete_topics([topic])[topic].result(60)
        time.sleep(2)
    admin.create_topics([NewTopic(topic, partitions, 1, config={"retention.ms": "-1"})])[topic].result(60)
    from pyspark.sql import functions as F

    filler = "x" * (value_bytes - 12)
    per_write = -(-records // writes)
    t0 = time.monotonic()
    for w in range(writes):
        first, last = w * per_write, min(records, (w + 1) * per_write)
        if first >= last:
            break
        df = (spark.range(first, last, numPartitions=partitions)
              .select((F.col("id") % 100_000).cast("string").alias("key"),
                      F.concat(F.format_string("%012d", F.col("id")), F.lit(filler)).alias("value"),
                      (F.col("id") % partitions).cast("int").alias("partition")))
        (df.write.format("jetkafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
         .option("mode", "exactly-once").option("sinkId", f"bench{w}").mode("append").save())
        if aborted:
            _abort_some(bootstrap, topic, partitions, aborted, filler.encode())
    print(f"wrote {records} committed records (+{aborted} aborted after each of {writes} writes) to {topic} "
          f"in {time.monotonic() - t0:.1f} s", flush=True)
    return topic


def spark_rate(spark, fmt: str, bootstrap: str, topic: str, records: int, workdir: Path) -> float:
    checkpoint = workdir / f"ck-{fmt}-{time.monotonic_ns()}"
    reader = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    if fmt == "kafka":
        reader = reader.option("kafka.isolation.level", "read_committed")
    df = reader.load()
    t0 = time.monotonic()
    query = (df.writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    elapsed = time.monotonic() - t0
    if query.exception() is not None:
        raise RuntimeError(f"{fmt}: {query.exception()}")
    read = sum(p["numInputRows"] for p in query.recentProgress)
    # jetkafka may add heartbeat rows (a batch whose range of a partition holds only markers)
    if read < records or (fmt == "kafka" and read != records):
        raise RuntimeError(f"{fmt} read {read} rows, expected {records} (stale topic {topic}? delete it)")
    shutil.rmtree(checkpoint, ignore_errors=True)
    return records / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--writes", type=int, default=10)
    parser.add_argument("--aborted", type=int, default=20_000, help="aborted records after each write")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--reader", choices=["native", "confluent"], default="native",
                        help="jetkafka's reader (native falls back to confluent-kafka when not built)")
    args = parser.parse_args()
    os.environ["JETSPARK_KAFKA_READER"] = args.reader  # before Spark starts: its workers inherit it

    sys.path.insert(0, str(ROOT))
    from bench.bench_jetkafka import worker_reader
    from jetspark.maven import SPARK_KAFKA, spark_jars_conf
    from jetspark.spark import local_session

    bootstrap = os.environ.get("JETSPARK_KAFKA_BOOTSTRAP")
    if not bootstrap:
        from jetspark.services import acquire

        bootstrap = acquire(["kafka"]).endpoints.kafka_bootstrap
    spark = local_session("bench-jetkafka-chained", conf=spark_jars_conf(SPARK_KAFKA))
    workdir = Path(tempfile.mkdtemp(prefix="bench-jetkafka-chained-"))
    rates: dict[str, list[float]] = {"jetkafka": [], "kafka": []}
    try:
        topic = ensure_topic(spark, bootstrap, args.records, args.partitions, args.value_bytes, args.writes,
                             args.aborted)
        reader = worker_reader(spark)
        print(f"jetkafka reader in Spark workers: {reader}", flush=True)
        for fmt in rates:  # warm-up: JIT, jars, Python workers
            spark_rate(spark, fmt, bootstrap, topic, args.records, workdir)
        for i in range(args.repeat):
            order = ["jetkafka", "kafka"] if i % 2 == 0 else ["kafka", "jetkafka"]
            for fmt in order:
                rate = spark_rate(spark, fmt, bootstrap, topic, args.records, workdir)
                rates[fmt].append(rate)
                print(f"run {i + 1} {fmt:9s} {rate:12,.0f} records/s", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        spark.stop()
    best = {fmt: max(r) for fmt, r in rates.items()}
    ratio = best["jetkafka"] / best["kafka"]
    print(f"best (transactional topic): jetkafka {best['jetkafka']:,.0f} /s, Spark kafka read_committed "
          f"{best['kafka']:,.0f} /s, ratio jetkafka/kafka = {ratio:.2f}; jetkafka reader: {reader}")

    report = {
        "records": args.records, "partitions": args.partitions, "value_bytes": args.value_bytes,
        "writes": args.writes, "aborted_per_write": args.aborted, "master": "local[2]",
        "jetkafka_reader": reader, "runs": rates, "best": best, "ratio_jetkafka_over_kafka": ratio,
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    reports = ROOT / "bench" / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    path = reports / f"jetkafka-chained-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"report: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
