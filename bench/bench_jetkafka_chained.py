"""Benchmark: a chained pipeline's input — a topic written transactionally — read by jetkafka
and by Spark's Kafka source (``kafka.isolation.level=read_committed``).

The topic (default 5 million committed records of ~100 bytes, 8 partitions; created and
filled once, reused by later runs with the same size) is written by jetkafka's sink in
``guarantee=exactly-once`` (commit=task: one Kafka transaction per sink task, markers in every
partition), in ``--writes`` batch writes; between them a transactional producer writes
records it aborts (``--aborted`` per write, spread over the partitions). Such offsets —
markers and aborted records — make Kafka's ListOffsets(max timestamp) useless to jetkafka's
driver, which then reads each batch's range for its greatest timestamp (through the native
reader when it is built).

Both sources read the topic from earliest to a ``noop`` sink with
``Trigger.AvailableNow`` in one Spark session, alternating which goes first; the median of
``--repeat`` runs of each is reported as committed records per second, with their ratio
and the load average.

    .venv/bin/python bench/bench_jetkafka_chained.py [--records 5000000] [--partitions 8]
        [--writes 10] [--aborted 20000] [--repeat 3] [--reader native|confluent]

Endpoint: ``JETSPARK_KAFKA_BOOTSTRAP`` or jetspark's service discovery. A report goes to
``bench/reports/``.
"""

from __future__ import annotations

import sys
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_bench import ROOT, alternate, kafka_bootstrap, parser, summary, worker_reader, write_report


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
         .option("guarantee", "exactly-once").option("sinkId", f"bench{w}").mode("append").save())
        if aborted:
            _abort_some(bootstrap, topic, partitions, aborted, filler.encode())
    print(f"wrote {records} committed records (+{aborted} aborted after each of {writes} writes) to {topic} "
          f"in {time.monotonic() - t0:.1f} s", flush=True)
    return topic


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--writes", type=int, default=10)
    p.add_argument("--aborted", type=int, default=20_000, help="aborted records after each write")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    from jetspark.devtools.maven import SPARK_KAFKA, spark_jars_conf
    from jetspark.devtools.spark import local_session

    bootstrap = kafka_bootstrap(args.reader)
    spark = local_session("bench-jetkafka-chained", conf=spark_jars_conf(SPARK_KAFKA))
    try:
        topic = ensure_topic(spark, bootstrap, args.records, args.partitions, args.value_bytes, args.writes,
                             args.aborted)
        reader = worker_reader(spark)
        print(f"jetkafka reader in Spark workers: {reader}", flush=True)
        result = summary(alternate(spark, bootstrap, topic, args.records, args.repeat, read_committed=True))
    finally:
        spark.stop()
    median = result["median"]
    print(f"median of {args.repeat} (transactional topic): jetkafka {median['jetkafka']:,.0f} /s, "
          "Spark kafka "
          f"read_committed {median['kafka']:,.0f} /s, ratio jetkafka/kafka = "
          f"{result['ratio_jetkafka_over_kafka']:.2f}; jetkafka reader: {reader}; load average "
          + " ".join(f"{x:.2f}" for x in result["load_average"]))
    write_report("jetkafka-chained", {
        "records": args.records, "partitions": args.partitions, "value_bytes": args.value_bytes,
        "writes": args.writes, "aborted_per_write": args.aborted, "master": "local[2]",
        "jetkafka_reader": reader, **result,
    })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
