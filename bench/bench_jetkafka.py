"""Benchmark: jetkafka vs Spark's built-in Kafka source, and a plain confluent-kafka consumer.

One topic (default 5 million records of ~100 bytes, 8 partitions; created and filled once,
reused by later runs with the same size) is read from earliest to a ``noop`` sink with
``Trigger.AvailableNow`` by ``format("jetkafka")`` and by ``format("kafka")``
(spark-sql-kafka from Maven Central, see ``jetspark.maven``), in one Spark session,
alternating which goes first; the best of ``--repeat`` runs of each is reported as records
per second and their ratio. The ceiling is one plain confluent-kafka consumer reading the
same topic in this Python process (touching each value), the raw rate Python gets.

    .venv/bin/python bench/bench_jetkafka.py [--records 5000000] [--partitions 8] [--repeat 2]
        [--reader native|confluent]

jetkafka reads through its native librdkafka → Arrow reader when built (else, or with
``--reader confluent``, through confluent-kafka); the reader its Spark tasks used is printed.

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
from pathlib import Path

from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent


def ensure_topic(bootstrap: str, records: int, partitions: int, value_bytes: int) -> str:
    """A topic holding exactly ``records`` records, created and filled on first use."""
    topic = f"jetbench_{records}_{partitions}_{value_bytes}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic in admin.list_topics(timeout=30).topics:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "jetbench-probe"})
        total = sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] -
                    consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[0]
                    for p in range(partitions))
        consumer.close()
        if total == records:
            return topic
        admin.delete_topics([topic])[topic].result(60)
        time.sleep(2)
    admin.create_topics([NewTopic(topic, partitions, 1, config={"retention.ms": "-1"})])[topic].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.num.messages": 10_000,
                         "queue.buffering.max.messages": 1_000_000, "compression.type": "lz4"})
    value = b"x" * (value_bytes - 12)
    t0 = time.monotonic()
    for i in range(records):
        payload = b"%012d" % i + value
        while True:
            try:
                producer.produce(topic, payload, key=b"%d" % (i % 100_000), partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(300)
    print(f"produced {records} records to {topic} in {time.monotonic() - t0:.1f} s", flush=True)
    return topic


def plain_consumer_rate(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "jetbench-plain",
                         "enable.auto.commit": False, "enable.partition.eof": False,
                         "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 16 << 20})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    n = size = 0
    t0 = time.monotonic()
    while n < records:
        msgs = consumer.consume(10_000, 1.0)
        n += len(msgs)
        size += sum(map(len, map(Message.value, msgs)))
    elapsed = time.monotonic() - t0
    consumer.close()
    return n / elapsed


def spark_rate(spark, fmt: str, bootstrap: str, topic: str, records: int, workdir: Path) -> float:
    checkpoint = workdir / f"ck-{fmt}-{time.monotonic_ns()}"
    df = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest").load())
    t0 = time.monotonic()
    query = (df.writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    elapsed = time.monotonic() - t0
    if query.exception() is not None:
        raise RuntimeError(f"{fmt}: {query.exception()}")
    read = sum(p["numInputRows"] for p in query.recentProgress)
    if read != records:
        raise RuntimeError(f"{fmt} read {read} rows, expected {records}")
    shutil.rmtree(checkpoint, ignore_errors=True)
    return records / elapsed


def worker_reader(spark) -> str:
    """The Kafka reader jetkafka's read tasks use, asked from a Spark Python worker."""

    def probe(_):
        from jetspark.datasources.kafka_read import reader_description

        yield reader_description()

    return spark.sparkContext.parallelize([0], 1).mapPartitions(probe).collect()[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--reader", choices=["native", "confluent"], default="native",
                        help="jetkafka's reader (native falls back to confluent-kafka when not built)")
    args = parser.parse_args()
    os.environ["JETSPARK_KAFKA_READER"] = args.reader  # before Spark starts: its workers inherit it

    sys.path.insert(0, str(ROOT))
    from jetspark.datasources.kafka_source import KafkaDataSource
    from jetspark.maven import SPARK_KAFKA, spark_jars_conf
    from jetspark.spark import local_session

    bootstrap = os.environ.get("JETSPARK_KAFKA_BOOTSTRAP")
    if not bootstrap:
        from jetspark.services import acquire

        bootstrap = acquire(["kafka"]).endpoints.kafka_bootstrap
    topic = ensure_topic(bootstrap, args.records, args.partitions, args.value_bytes)
    ceiling = plain_consumer_rate(bootstrap, topic, args.partitions, args.records)
    print(f"plain confluent-kafka consumer (1 Python thread): {ceiling:,.0f} records/s", flush=True)

    spark = local_session("bench-jetkafka", conf=spark_jars_conf(SPARK_KAFKA))
    spark.dataSource.register(KafkaDataSource)
    reader = worker_reader(spark)
    print(f"jetkafka reader in Spark workers: {reader}", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="bench-jetkafka-"))
    rates: dict[str, list[float]] = {"jetkafka": [], "kafka": []}
    try:
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
    print(f"best: jetkafka {best['jetkafka']:,.0f} /s, Spark kafka {best['kafka']:,.0f} /s, "
          f"ratio jetkafka/kafka = {ratio:.2f}; plain consumer ceiling {ceiling:,.0f} /s; "
          f"jetkafka reader: {reader}")

    report = {
        "records": args.records, "partitions": args.partitions, "value_bytes": args.value_bytes,
        "master": "local[2]", "jetkafka_reader": reader, "runs": rates, "best": best,
        "ratio_jetkafka_over_kafka": ratio, "plain_consumer_records_per_s": ceiling,
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    reports = ROOT / "bench" / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    path = reports / f"jetkafka-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"report: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
