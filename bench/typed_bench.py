"""What the typed-value benchmarks share (``bench_avro.py``, ``bench_protobuf.py``,
``bench_avro_sink.py``): the
registry, a topic filled once with a pool of framed values, the sample check against Spark's
own decoder, and the alternating timed runs with their report."""

from __future__ import annotations

import argparse
import glob
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
    ap.add_argument("--handoff", action="store_true",
                    help="also run 'handoff': jetspark's decoded batches handed to Spark ready-made "
                         "(no Kafka, no decoding), the JVM's share of the typed read")
    ap.add_argument("--arrow-checks", action="store_true",
                    help="keep Arrow's bounds and null checks in the JVM (Spark's default); without "
                         "it the session runs with the Java options docs/how-to/deploy.md advises")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    return args


def session_conf(args: argparse.Namespace, jars: dict[str, str]) -> dict[str, str]:
    """The bench session's settings: the jars, and Arrow's checks off unless ``--arrow-checks``."""
    from jetspark.devtools.spark import arrow_unchecked_conf

    return {**jars, **({} if args.arrow_checks else arrow_unchecked_conf())}


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


def handoff(spark, decoded, records: int, partitions: int) -> Callable:
    """A contender reading ``records`` rows from a Python data source that yields, in
    ``partitions`` tasks, the first 20,000 rows of partition 0 of ``decoded`` (jetspark's typed
    read) as ready-made Arrow batches: what Spark's JVM costs to take the typed batches, with no
    Kafka and no decoding."""
    import tempfile

    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    sample = decoded.where(f"partition = 0 AND offset < {min(20_000, records // partitions)}")
    table = sample.toArrow().combine_chunks()
    path = os.path.join(tempfile.mkdtemp(prefix="jetbench-handoff-"), "batch.arrow")
    with pa.OSFile(path, "wb") as f, pa.ipc.new_file(f, table.schema) as w:
        w.write_table(table)
    schema = sample.schema

    class Reader(DataSourceReader):
        def partitions(self):
            return [InputPartition(i) for i in range(partitions)]

        def read(self, partition):
            import pyarrow as pa

            with pa.memory_map(path) as source:
                batch = pa.ipc.open_file(source).read_all().to_batches()[0]
            for _ in range(0, records // partitions, batch.num_rows):
                yield batch

    class Handoff(DataSource):
        @classmethod
        def name(cls) -> str:
            return "jetbench_handoff"

        def schema(self):
            return schema

        def reader(self, schema):
            return Reader()

    spark.dataSource.register(Handoff)
    return lambda: spark.read.format("jetbench_handoff").load().select("value.*").write


def cpu_seconds() -> dict[int, tuple[str, float]]:
    """Per process, its kind (``jvm``: a Spark JVM, ``python_workers``: PySpark's daemon and
    workers) and its CPU seconds so far, from ``/proc``."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(stat[:-4] + "cmdline", "rb") as f:
                command = f.read()
        except OSError:
            continue
        kind = ("jvm" if b"SparkSubmit" in command else
                "python_workers" if b"pyspark.daemon" in command or b"pyspark.worker" in command else None)
        if kind:
            out[int(stat.split("/")[2])] = (kind, (int(fields[11]) + int(fields[12])) / tick)
    return out


def cpu_spent(before: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds per kind since ``before`` (:func:`cpu_seconds`) of the processes alive now (a
    worker Spark ended in between is not counted)."""
    spent = {"jvm": 0.0, "python_workers": 0.0}
    for pid, (kind, seconds) in cpu_seconds().items():
        spent[kind] += seconds - before.get(pid, (kind, 0.0))[1]
    return {k: round(v, 2) for k, v in spent.items()}


def run_and_report(name: str, contenders: dict[str, Callable], records: int, repeat: int,
                   spark_label: str, report: dict) -> None:
    """``repeat`` rounds of every contender in turn (Spark's first), the medians in records per
    second with jetspark's ratio to Spark's and the load average, and a report. Each run also
    prints the CPU seconds the Spark JVM and the Python workers spent in it."""
    runs: dict[str, list[float]] = {c: [] for c in contenders}
    cpu: dict[str, list[dict[str, float]]] = {c: [] for c in contenders}
    for r in range(repeat):
        for contender, make in contenders.items():
            before = cpu_seconds()
            seconds = timed(make())
            spent = cpu_spent(before)
            runs[contender].append(records / seconds)
            cpu[contender].append(spent)
            print(
                f"run {r + 1} {contender:9s} {seconds:7.2f} s  {records / seconds:12,.0f} records/s  "
                f"cpu: JVM {spent['jvm']:5.1f} s, Python workers {spent['python_workers']:5.1f} s  "
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
        + f"; jetspark / ceiling = {median['jetspark'] / median['bytes']:.2f}; Arrow's JVM checks "
        + ("on" if report.get("arrow_checks") else "off") + "; load average "
        + " ".join(f"{x:.2f}" for x in load)
    )
    write_report(name, {**report, "records": records, "master": "local[2]", "runs": runs, "cpu_seconds": cpu,
                        "median": median, "ratio_jetspark_over_spark": ratio, "load_average": load})
