"""Shared by the jetkafka tests and their query scripts: produce known records, read them back."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from confluent_kafka import Producer

BASE_TS = (time.time_ns() // 60_000_000_000) * 60_000 - 2 * 3_600_000
"""Event times in the tests are offsets from this epoch-ms instant: two hours ago, so the
broker's time retention (7 days) and future-timestamp check (1 hour) leave them alone.
Scripts get the test's value as an argument."""


def produce(bootstrap: str, topic: str, records: Iterable[Sequence], *, transactional_id: str | None = None,
            abort: bool = False) -> int:
    """Produce ``(partition, key, value, ts_ms[, headers])`` records, in order, and flush.

    With ``transactional_id`` all records go in one transaction, committed (or aborted).
    """
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True}
    if transactional_id:
        conf["transactional.id"] = transactional_id
    producer = Producer(conf)
    if transactional_id:
        producer.init_transactions(30)
        producer.begin_transaction()
    n = 0
    failed: list[str] = []

    def delivered(err, msg) -> None:
        if err is not None:
            failed.append(f"partition {msg.partition()}: {err}")

    for rec in records:
        partition, key, value, ts = rec[:4]
        headers = rec[4] if len(rec) > 4 else None
        while True:
            try:
                producer.produce(topic, value=value, key=key, partition=partition, timestamp=ts,
                                 headers=headers, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        n += 1
    if transactional_id:
        assert producer.flush(30) == 0  # in the log before the abort, as aborted data
        if abort:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    remaining = producer.flush(30)
    assert remaining == 0, f"{remaining} records not delivered"
    assert not failed, f"{len(failed)} records failed, first: {failed[0]}"
    return n


def numbered(partition: int, start: int, count: int, *, ts0: int = BASE_TS, step_ms: int = 1000,
             tag: str = "r") -> list[tuple]:
    """``count`` records for ``partition`` with keys ``{tag}{partition}-{i}`` and rising event times."""
    return [(partition, f"{tag}{partition}-{i}".encode(), f"v{i}".encode(), ts0 + i * step_ms)
            for i in range(start, start + count)]


def produce_values(bootstrap: str, topic: str, values: Sequence[bytes | None]) -> None:
    """``values`` to partition 0, in order, stamped now (older records would be deleted by the
    topic's retention)."""
    now = int(time.time() * 1000)
    produce(bootstrap, topic, [(0, None, v, now + i) for i, v in enumerate(values)])


def read_typed(spark, bootstrap: str, topic: str, registry: str, fmt: str, *, stream: bool = False,
               **extra: str):
    """A read of ``topic`` (a stream from the earliest offsets when ``stream``) with
    ``value.format=fmt`` from the registry, and ``extra`` options."""
    from pyspark_jetkafka import DefaultSource  # source and sink, as format("jetkafka") is

    spark.dataSource.register(DefaultSource)
    reader = spark.readStream.option("startingOffsets", "earliest") if stream else spark.read
    return (reader.format("jetkafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("value.format", fmt)
            .option("schemaRegistry.url", registry).options(**extra).load())


def stream_rows(spark, stream, checkpoint: str) -> list:
    """Every row ``stream`` has now (a memory sink, ``availableNow``), in offset order when it
    has an ``offset`` column."""
    import uuid

    name = f"rows_{uuid.uuid4().hex[:8]}"
    query = (stream.writeStream.format("memory").queryName(name).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    rows = spark.sql(f"SELECT * FROM {name}")
    return (rows.orderBy("offset") if "offset" in rows.columns else rows).collect()
