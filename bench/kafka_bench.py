"""What the Kafka benchmarks share: arguments, the broker, one timed read, alternating runs,
the median and the report (with the load average)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORMATS = ("jetkafka", "kafka")


def parser(doc: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--records", type=int, default=5_000_000)
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--repeat", type=int, default=3, help="alternating runs of each source (median)")
    p.add_argument("--reader", choices=["native", "confluent"], default="native",
                   help="jetkafka's reader (native falls back to confluent-kafka when not built)")
    return p


def kafka_bootstrap(reader: str) -> str:
    """The broker (``JETSPARK_KAFKA_BOOTSTRAP`` or jetspark's services); sets jetkafka's reader
    for the Spark workers started afterwards (they inherit the environment)."""
    os.environ["JETSPARK_KAFKA_READER"] = reader
    bootstrap = os.environ.get("JETSPARK_KAFKA_BOOTSTRAP")
    if bootstrap:
        return bootstrap
    from jetspark.devtools.services import acquire

    return acquire(["kafka"]).endpoints.kafka_bootstrap


def worker_reader(spark) -> str:
    """The Kafka reader jetkafka's read tasks use, asked from a Spark Python worker."""

    def probe(_):
        from jetspark.datasources.kafka.consumers import reader_description

        yield reader_description()

    return spark.sparkContext.parallelize([0], 1).mapPartitions(probe).collect()[0]


def spark_rate(spark, fmt: str, bootstrap: str, topic: str, records: int, workdir: Path,
               *, read_committed: bool = False) -> float:
    """Records per second of one ``Trigger.AvailableNow`` read of ``topic`` to ``noop``."""
    checkpoint = workdir / f"ck-{fmt}-{time.monotonic_ns()}"
    reader = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    if read_committed and fmt == "kafka":
        reader = reader.option("kafka.isolation.level", "read_committed")
    t0 = time.monotonic()
    query = (reader.load().writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    elapsed = time.monotonic() - t0
    if query.exception() is not None:
        raise RuntimeError(f"{fmt}: {query.exception()}")
    read = sum(p["numInputRows"] for p in query.recentProgress)
    if read != records:  # a plain jetkafka read has exactly Spark's rows: no heartbeat row
        raise RuntimeError(f"{fmt} read {read} rows, expected {records} (stale topic {topic}? delete it)")
    shutil.rmtree(checkpoint, ignore_errors=True)
    return records / elapsed


def alternate(spark, bootstrap: str, topic: str, records: int, repeat: int, *,
              read_committed: bool = False) -> dict[str, list[float]]:
    """A warm-up read of each source, then ``repeat`` rounds alternating which goes first."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    rates: dict[str, list[float]] = {fmt: [] for fmt in FORMATS}
    try:
        for fmt in FORMATS:  # JIT, jars, Python workers
            spark_rate(spark, fmt, bootstrap, topic, records, workdir, read_committed=read_committed)
        for i in range(repeat):
            for fmt in FORMATS if i % 2 == 0 else FORMATS[::-1]:
                rate = spark_rate(spark, fmt, bootstrap, topic, records, workdir,
                                  read_committed=read_committed)
                rates[fmt].append(rate)
                print(f"run {i + 1} {fmt:9s} {rate:12,.0f} records/s", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return rates


def summary(rates: dict[str, list[float]]) -> dict:
    """Medians, their ratio and the load average now."""
    median = {fmt: statistics.median(r) for fmt, r in rates.items()}
    ratio = median["jetkafka"] / median["kafka"]
    return {"runs": rates, "median": median, "ratio_jetkafka_over_kafka": ratio,
            "load_average": os.getloadavg()}


def write_report(name: str, report: dict) -> Path:
    reports = ROOT / "bench" / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    report = {**report, "when": time.strftime("%Y-%m-%d %H:%M:%S")}
    path = reports / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"report: {path}")
    return path
