"""What the typed-value benchmarks share (``bench_avro.py``, ``bench_protobuf.py``,
``bench_avro_sink.py``): the
registry, a topic filled once with a pool of framed values, the sample check against Spark's
own decoder, and the alternating timed runs with their report."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

from kafka_bench import ROOT, write_report

SPARK_AVRO = "org.apache.spark:spark-avro_2.13:4.2.0"


def arguments(doc: str, records: int, partitions: int) -> argparse.Namespace:
    """A typed-value benchmark's command line (``--records``, ``--partitions``, ``--distinct``,
    ``--repeat``), with the project importable."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--records", type=int, default=records)
    ap.add_argument("--partitions", type=int, default=partitions)
    ap.add_argument("--distinct", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    return args


def services() -> tuple[str, str]:
    """The Kafka bootstrap servers and the registry's URL."""
    from kafka_bench import kafka_bootstrap

    return kafka_bootstrap("native"), registry_url()


def registry_url() -> str:
    url = os.environ.get("JETSPARK_SCHEMA_REGISTRY_URL")
    if url:
        return url
    from jetspark.devtools.services import acquire

    return acquire(["registry"]).endpoints.schema_registry_url


def fill_topic(bootstrap: str, topic: str, pool: list[bytes], records: int, partitions: int) -> None:
    """``topic`` with ``records`` values cycled from ``pool`` (kept when it already has them)."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic in admin.list_topics(timeout=30).topics:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "jetbench-probe"})
        total = sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)
        )
        consumer.close()
        if total == records:
            return
        admin.delete_topics([topic])[topic].result(60)
        time.sleep(2)
    admin.create_topics([NewTopic(topic, partitions, 1, config={"retention.ms": "-1"})])[topic].result(60)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "lz4",
        }
    )
    t0 = time.monotonic()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, pool[i % len(pool)], partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(600)
    size = sum(map(len, pool)) / len(pool)
    print(
        f"produced {records} records (about {size:.0f} bytes each) to {topic} in "
        f"{time.monotonic() - t0:.1f} s",
        flush=True,
    )


def same_sample(ours: list, theirs: list, decoder: str) -> None:
    """Both decoders' rows of the same records (``partition``, ``offset`` and the fields) are equal."""
    key = lambda r: (r.partition, r.offset)  # noqa: E731
    assert sorted(ours, key=key) == sorted(theirs, key=key), f"jetkafka's values differ from {decoder}'s"
    print(f"the values of {len(ours)} records equal {decoder}'s", flush=True)


def timed(write) -> float:
    """Seconds to run ``write``: a DataFrameWriter (saved to the ``noop`` sink) or a function
    that writes itself (the sink benchmarks)."""
    t0 = time.perf_counter()
    if callable(write):
        write()
    else:
        write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t0


def run_and_report(name: str, contenders: dict[str, Callable], records: int, repeat: int,
                   spark_label: str, report: dict) -> None:
    """``repeat`` rounds of every contender in turn (Spark's first), the medians in records per
    second with jetspark's ratio to Spark's and the load average, and a report."""
    runs: dict[str, list[float]] = {c: [] for c in contenders}
    for r in range(repeat):
        for contender, make in contenders.items():
            seconds = timed(make())
            runs[contender].append(records / seconds)
            print(
                f"run {r + 1} {contender:9s} {seconds:7.2f} s  {records / seconds:12,.0f} records/s  "
                f"load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
    median = {c: statistics.median(rates) for c, rates in runs.items()}
    ratio = median["jetspark"] / median["spark"] if "spark" in median else None
    load = os.getloadavg()
    spark = (f"Spark {spark_label} {median['spark']:,.0f}, " if ratio else f"(no Spark {spark_label}) ")
    print(
        f"median of {repeat} (records/s): {spark}jetkafka value.format={name} {median['jetspark']:,.0f}, "
        f"jetkafka bytes (ceiling) {median['bytes']:,.0f}"
        + (f"; jetspark / Spark = {ratio:.2f}x" if ratio else "")
        + f"; jetspark / ceiling = {median['jetspark'] / median['bytes']:.2f}; load average "
        + " ".join(f"{x:.2f}" for x in load)
    )
    write_report(name, {**report, "records": records, "master": "local[2]", "runs": runs, "median": median,
                        "ratio_jetspark_over_spark": ratio, "load_average": load})
