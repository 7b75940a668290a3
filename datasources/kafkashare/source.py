"""``spark.readStream.format("jetkafkashare")``: a Kafka share group (KIP-932), exactly once.

Usage::

    stream = (spark.readStream.format("jetkafkashare")
              .option("kafka.bootstrap.servers", "localhost:9092")
              .option("kafka.group.id", "orders-workers")   # the share group
              .option("subscribe", "orders")
              .load())

Rows: Spark's Kafka columns (``key``, ``value``, ``topic``, ``partition``, ``offset``,
``timestamp``, ``timestampType``, ``headers`` with ``includeHeaders``), then ``deliveryCount``;
with typed keys or values (``value.format`` and the other options of jetkafka's), ``key`` and
``value`` are decoded and ``keyError`` / ``valueError`` come last, as on jetkafka.

The driver acquires a micro-batch's records through the share group and logs their
(topic, partition, offset) runs as the batch's offset; read tasks read those records back from
Kafka by offset (no payload is copied anywhere); the records are ACCEPTed only after Spark
committed the batch. See :mod:`.driver` and docs/design.md, "Share groups".
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadMaxRows, SupportsTriggerAvailableNow

from jetspark.datasources.kafka.read import RangeSpec, ReadSettings, read_range
from jetspark.datasources.kafka.schema import spark_schema, typed_spark_schema
from jetspark.datasources.kafka.typed_values import check_planned, check_replay
from jetspark.datasources.kafkashare.acquired import from_runs
from jetspark.datasources.kafkashare.options import ShareOptions
from jetspark.errors import JetsparkError

FORMAT = "jetkafkashare"
DELIVERY_COUNT = "deliveryCount"


def share_schema(options: ShareOptions) -> str | T.StructType:
    """The rows' schema: Spark's Kafka columns, ``deliveryCount``, then the typed columns'
    error columns (``keyError``, ``valueError``) when keys or values are typed."""
    if not options.typed:
        return f"{spark_schema(options.include_headers, marks=False)}, {DELIVERY_COUNT} int"
    fields = typed_spark_schema(options.include_headers, list(options.typed), marks=False).fields
    errors = len(options.typed)  # the error columns are last
    count = T.StructField(DELIVERY_COUNT, T.IntegerType())
    return T.StructType([*fields[:-errors], count, *fields[-errors:]])


@dataclass(frozen=True)
class SharePartition(InputPartition):
    """One read task: the acquired records of one Kafka partition, as offset runs."""

    topic: str
    partition: int
    runs: tuple[tuple[int, int, int], ...]


def read_partition(settings: ReadSettings, p: SharePartition) -> Iterator[pa.RecordBatch]:
    """The records of ``p``'s runs, read by offset from Kafka (the range from the first to the
    last acquired offset; the offsets other members took are dropped), with ``deliveryCount``."""
    offsets, counts = from_runs([list(r) for r in p.runs])
    if len(offsets) == 0:
        return
    wanted = pa.array(offsets)
    rng = RangeSpec(p.topic, p.partition, int(offsets[0]), int(offsets[-1]) + 1, None, None, None,
                    detect_late=False)
    found = 0
    for batch in read_range(settings, rng):
        kept = batch.filter(pc.is_in(batch.column("offset"), value_set=wanted))
        if kept.num_rows == 0:
            continue
        found += kept.num_rows
        at = np.searchsorted(offsets, kept.column("offset").to_numpy())
        dc = pa.array(counts[at].astype(np.int32), pa.int32())
        out = pa.RecordBatch.from_arrays([*kept.columns, dc], [*kept.schema.names, DELIVERY_COUNT])
        for typed in settings.typed:
            out = typed.decode_batch(out)
        yield out
    if found != len(offsets):
        # ACCEPTing a record no row was made of would lose it: fail the batch instead
        raise JetsparkError(
            f"jetkafkashare: {len(offsets) - found} of the {len(offsets)} records the share group handed "
            f"out from topic {p.topic!r} partition {p.partition} (offsets {offsets[0]}..{offsets[-1]}) "
            "were not found reading the partition by offset: deleted by retention, or records of an "
            "open or aborted transaction (the group's share.isolation.level is read_uncommitted while "
            "the reader's kafka.isolation.level is read_committed: set both alike)")


def _settings(options: ShareOptions) -> ReadSettings:
    return ReadSettings(kafka=options.reader_kafka, include_headers=options.include_headers, keep_late=True,
                        fail_on_data_loss=True, poll_timeout_ms=options.poll_timeout_ms,
                        chunk_rows=options.chunk_rows, marks=False, typed=options.typed)


class ShareStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Spark's handle on the share group. The driver state is created on first use and never
    pickled (read tasks get the options, not the consumer)."""

    def __init__(self, options: ShareOptions) -> None:
        self.options = options
        self._driver = None

    def __getstate__(self) -> dict:
        return {"options": self.options, "_driver": None}

    @property
    def driver(self):
        if self._driver is None:
            from jetspark.datasources.kafkashare.driver import ShareDriver

            self._driver = ShareDriver(self.options)
        return self._driver

    def initialOffset(self) -> dict:
        return self.driver.initial_offset()

    def prepareForTriggerAvailableNow(self) -> None:
        self.driver.prepare_available_now()

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.options.max_records)

    def latestOffset(self, start: dict, limit=None) -> dict:
        del limit  # the consumer's max.poll.records is maxOffsetsPerTrigger
        return self.driver.latest_offset(start)

    def partitions(self, start: dict, end: dict) -> list[SharePartition]:
        check_replay(self.options.typed, end.get("readers"), f"seq {end.get('seq')}")
        self.driver.planned(start, end)
        return [SharePartition(topic, int(part), tuple(tuple(r) for r in runs))
                for topic, parts in sorted(end.get("acquired", {}).items())
                for part, runs in sorted(parts.items(), key=lambda kv: int(kv[0])) if runs]

    def read(self, partition: SharePartition):
        return read_partition(_settings(self.options), partition)

    def commit(self, end: dict) -> None:
        self.driver.accept_through(int(end["seq"]))

    def stop(self) -> None:
        if self._driver is not None:
            self._driver.stop()


class KafkaShareDataSource(DataSource):
    """``format("jetkafkashare")``; options: see :class:`ShareOptions`."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str | T.StructType:
        return share_schema(ShareOptions.parse(self.options))

    def streamReader(self, schema) -> ShareStreamReader:
        options = ShareOptions.parse(self.options)
        check_planned(options.typed, schema)
        return ShareStreamReader(options)


__all__ = ["FORMAT", "KafkaShareDataSource"]
