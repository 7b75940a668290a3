"""Benchmark: jetkafkashare (a share group) vs jetkafka's consumer-group read, and a plain share consumer.

One topic (default 200,000 records of ~100 bytes, 4 partitions; created and filled once, reused
by later runs with the same size, as bench_jetkafka does) is read whole, in one Spark session:

* ``jetkafka`` — ``format("jetkafka")`` from earliest, ``Trigger.AvailableNow``, into ``noop``
  (the reference: a consumer-group read of the same records; first, so the cold run is not
  the share source's to hide);
* ``jetkafkashare`` — ``format("jetkafkashare")`` as a new share group (its
  ``share.auto.offset.reset`` earliest), the default trigger until every record is in a
  committed batch (``processAllAvailable``), into ``noop``; each micro-batch is one poll of at
  most ``maxOffsetsPerTrigger`` records (``--max-per-trigger``), ACCEPTed after its commit;
* ``plain-share`` — a confluent-kafka share consumer in this Python process, a new share group
  too: each poll's records ACCEPTed and confirmed (``commit_sync``) before the next poll, as
  the source does — the rate the share group gives one Python member.

Rounds alternate the Spark contenders' order after a warm-up read of each; the median of
``--repeat`` runs of each is printed as records per second with the ratios and the load average.

    .venv/bin/python bench/bench_kafkashare.py [--records 200000] [--partitions 4] [--repeat 3]
        [--max-per-trigger 10000]

Endpoint: ``JETSPARK_KAFKA_BOOTSTRAP`` or jetspark's service discovery (a Kafka 4.2 broker with
share groups). A report goes to ``bench/reports/``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench_jetkafka import ensure_topic
from confluent_kafka import AcknowledgeType, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kafka_bench import ROOT, kafka_bootstrap, parser, spark_rate, write_report

CONTENDERS = ("jetkafka", "jetkafkashare")


def new_share_group(bootstrap: str) -> str:
    """A share group of its own that starts at the earliest offset."""
    group = f"jetbench-share-{uuid.uuid4().hex[:10]}"
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(60)
    return group


def share_rate(spark, bootstrap: str, topic: str, records: int, workdir: Path, max_per_trigger: int) -> float:
    """Records per second of one share-group read of the whole topic to ``noop``."""
    group = new_share_group(bootstrap)
    checkpoint = workdir / f"ck-share-{time.monotonic_ns()}"
    t0 = time.monotonic()
    query = (spark.readStream.format("jetkafkashare").option("kafka.bootstrap.servers", bootstrap)
             .option("kafka.group.id", group).option("subscribe", topic)
             .option("maxOffsetsPerTrigger", str(max_per_trigger)).load()
             .writeStream.format("noop").option("checkpointLocation", str(checkpoint)).start())
    try:
        read = 0
        while read < records:  # processAllAvailable ends at the first empty poll: go on to the end
            query.processAllAvailable()
            read = sum(p["numInputRows"] for p in query.recentProgress)
        elapsed = time.monotonic() - t0
    finally:
        query.stop()
    if read != records:
        raise RuntimeError(f"jetkafkashare read {read} rows, expected {records}")
    shutil.rmtree(checkpoint, ignore_errors=True)
    return records / elapsed


def plain_share_rate(bootstrap: str, topic: str, records: int, max_per_poll: int) -> float:
    """Records per second of one plain share consumer taking the whole topic."""
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": new_share_group(bootstrap),
                              "share.acknowledgement.mode": "explicit",
                              "max.poll.records": str(max_per_poll)})
    consumer.subscribe([topic])
    n = size = 0
    t0 = time.monotonic()
    try:
        while n < records:
            msgs = [m for m in consumer.poll(1.0) if m.error() is None]
            for m in msgs:
                size += len(m.value())
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            if msgs:
                consumer.commit_sync(60)
            n += len(msgs)
        return n / (time.monotonic() - t0)
    finally:
        consumer.close()


def main() -> int:
    p = parser(__doc__)
    p.set_defaults(records=200_000, partitions=4)
    p.add_argument("--max-per-trigger", type=int, default=10_000,
                   help="jetkafkashare's maxOffsetsPerTrigger (its default); the plain consumer's "
                   "max.poll.records")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    from pyspark_jetkafka import DefaultSource

    from jetspark.datasources.kafkashare.source import KafkaShareDataSource
    from jetspark.devtools.spark import local_session

    bootstrap = kafka_bootstrap(args.reader)
    topic = ensure_topic(bootstrap, args.records, args.partitions, args.value_bytes)
    spark = local_session("bench-kafkashare")
    spark.dataSource.register(DefaultSource)
    spark.dataSource.register(KafkaShareDataSource)
    workdir = Path(tempfile.mkdtemp(prefix="bench-share-"))
    rates: dict[str, list[float]] = {name: [] for name in (*CONTENDERS, "plain-share")}

    def run(name: str) -> float:
        if name == "jetkafka":
            return spark_rate(spark, "jetkafka", bootstrap, topic, args.records, workdir)
        if name == "jetkafkashare":
            return share_rate(spark, bootstrap, topic, args.records, workdir, args.max_per_trigger)
        return plain_share_rate(bootstrap, topic, args.records, args.max_per_trigger)

    try:
        for name in CONTENDERS:  # warm-up: JIT, Python workers
            run(name)
        for i in range(args.repeat):
            order = CONTENDERS if i % 2 == 0 else CONTENDERS[::-1]
            for name in (*order, "plain-share"):
                rates[name].append(run(name))
                print(f"run {i + 1} {name:14s} {rates[name][-1]:12,.0f} records/s", flush=True)
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    median = {name: statistics.median(r) for name, r in rates.items()}
    load = os.getloadavg()
    print(f"median of {args.repeat}: jetkafka {median['jetkafka']:,.0f} /s, jetkafkashare "
          f"{median['jetkafkashare']:,.0f} /s (ratio share/jetkafka "
          f"{median['jetkafkashare'] / median['jetkafka']:.2f}), plain share consumer "
          f"{median['plain-share']:,.0f} /s (ratio share/plain "
          f"{median['jetkafkashare'] / median['plain-share']:.2f}); maxOffsetsPerTrigger "
          f"{args.max_per_trigger}; load average " + " ".join(f"{x:.2f}" for x in load))
    write_report("kafkashare", {
        "records": args.records, "partitions": args.partitions, "value_bytes": args.value_bytes,
        "max_per_trigger": args.max_per_trigger, "master": "local[2]", "runs": rates, "median": median,
        "ratio_share_over_jetkafka": median["jetkafkashare"] / median["jetkafka"],
        "ratio_share_over_plain": median["jetkafkashare"] / median["plain-share"], "load_average": load,
    })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
