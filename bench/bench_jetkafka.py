"""Benchmark: jetkafka vs Spark's built-in Kafka source, and a plain confluent-kafka consumer.

One topic (default 5 million records of ~100 bytes, 8 partitions; created and filled once,
reused by later runs with the same size) is read from earliest to a ``noop`` sink with
``Trigger.AvailableNow`` by ``format("jetkafka")`` and by ``format("kafka")``
(spark-sql-kafka from Maven Central, see ``jetspark.devtools.maven``), in one Spark session,
alternating which goes first; the median of ``--repeat`` runs of each is reported as
records per second, with their ratio and the load average. The ceiling is one plain
confluent-kafka consumer reading the same topic in this Python process (touching each
value), the raw rate Python gets.

    .venv/bin/python bench/bench_jetkafka.py [--records 5000000] [--partitions 8] [--repeat 3]
        [--reader native|confluent]

jetkafka reads through its native librdkafka → Arrow reader when built (else, or with
``--reader confluent``, through confluent-kafka); the reader its Spark tasks used is printed.

Endpoint: ``JETSPARK_KAFKA_BOOTSTRAP`` or jetspark's service discovery. A report goes to
``bench/reports/``.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_bench import ROOT, alternate, kafka_bootstrap, parser, summary, worker_reader, write_report


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


def main() -> int:
    args = parser(__doc__).parse_args()
    sys.path.insert(0, str(ROOT))
    from pyspark_jetkafka import DefaultSource  # the one jetkafka format: source and sink

    from jetspark.devtools.maven import SPARK_KAFKA, spark_jars_conf
    from jetspark.devtools.spark import local_session

    bootstrap = kafka_bootstrap(args.reader)
    topic = ensure_topic(bootstrap, args.records, args.partitions, args.value_bytes)
    ceiling = plain_consumer_rate(bootstrap, topic, args.partitions, args.records)
    print(f"plain confluent-kafka consumer (1 Python thread): {ceiling:,.0f} records/s", flush=True)

    spark = local_session("bench-jetkafka", conf=spark_jars_conf(SPARK_KAFKA))
    spark.dataSource.register(DefaultSource)
    try:
        reader = worker_reader(spark)
        print(f"jetkafka reader in Spark workers: {reader}", flush=True)
        result = summary(alternate(spark, bootstrap, topic, args.records, args.repeat))
    finally:
        spark.stop()
    median = result["median"]
    print(f"median of {args.repeat}: jetkafka {median['jetkafka']:,.0f} /s, "
          f"Spark kafka {median['kafka']:,.0f} /s, "
          f"ratio jetkafka/kafka = {result['ratio_jetkafka_over_kafka']:.2f}; plain consumer ceiling "
          f"{ceiling:,.0f} /s; jetkafka reader: {reader}; load average "
          + " ".join(f"{x:.2f}" for x in result["load_average"]))
    write_report("jetkafka", {
        "records": args.records, "partitions": args.partitions, "value_bytes": args.value_bytes,
        "master": "local[2]", "jetkafka_reader": reader, **result, "plain_consumer_records_per_s": ceiling,
    })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
