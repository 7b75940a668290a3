"""The Kafka sink's writers, for ``format("jetkafka")`` on ``writeStream`` and ``write``.

The ``jetkafka`` DataSource (the source, in ``jetspark.datasources``) gets the sink by
mixing in :class:`KafkaSinkMixin`::

    class DefaultSource(KafkaSinkMixin, KafkaDataSource): ...

which delegates ``streamWriter``/``writer`` to :func:`make_kafka_stream_writer` /
:func:`make_kafka_writer` with the DataSource's options.

Commits (the words in :mod:`jetspark.sinks.guarantees`): ``task`` (default, with
``guarantee=exactly-once``) — a transactional producer per sink partition whose commit
carries the batch's marker, so a replayed batch is skipped (see
:mod:`jetspark.sinks.kafka.resource` for what Kafka cannot do, KIP-939: no ``two-phase``).
Consumers must read with ``isolation.level=read_committed``. ``none`` (with
``guarantee=at-least-once``) — the idempotent producer, flushed before the task ends.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter
from pyspark.sql.types import StructType

from jetspark import faults
from jetspark.datasources.kafka.refusals import Refusals, flush_until_delivered
from jetspark.sinks.kafka import typed_values
from jetspark.sinks.kafka.limits import TopicLimits
from jetspark.sinks.kafka.options import KafkaSinkOptions
from jetspark.sinks.kafka.rejected import RejectingProducer
from jetspark.sinks.kafka.resource import TIMEOUT_S, DeliveryErrors, KafkaResource, make_producer
from jetspark.sinks.kafka.rows import KafkaColumns, check_schema
from jetspark.sinks.transactional import (
    AFTER_COMMIT,
    DURING_WRITE,
    PartitionKey,
    SinkCommitMessage,
    SinkError,
    commit_batch,
    report_rejected,
    task_key,
    write_partition,
)


def produce_at_least_once(options: KafkaSinkOptions, columns: KafkaColumns, key: PartitionKey,
                          batches: Iterator[pa.RecordBatch]) -> tuple[int, int]:
    """Idempotent producer (no duplicates from its own retries); flushed and checked at the end.
    The rows written, and those Kafka refused (dead letters, ``onRejected``)."""
    errors, refusals = DeliveryErrors(), Refusals()
    limits = TopicLimits(options, (options.topic, options.dead_letter_topic))
    producer = make_producer(options, {"enable.idempotence": "true", "error_cb": refusals}, errors, limits)
    records = RejectingProducer(options, columns, key, producer, limits)
    for batch in batches:
        if batch.num_rows:
            records.write(batch)
            faults.point(DURING_WRITE)
    remaining = flush_until_delivered(producer, refusals, TIMEOUT_S, options.scrub)
    if remaining or errors.errors:
        first = options.scrub(errors.errors[0]) if errors.errors else "timed out"
        raise SinkError(f"{remaining + len(errors.errors)} records not delivered to Kafka "
                        f"({options.bootstrap}); first error: {first}")
    return records.rows, records.rejected


class _KafkaWrite:
    options: KafkaSinkOptions
    columns: KafkaColumns

    def _write_task(self, key: PartitionKey, batches: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        if self.options.transactional:
            with KafkaResource(self.options, self.columns) as resource:
                return write_partition(resource, key, batches)
        rows, rejected = produce_at_least_once(self.options, self.columns, key, batches)
        return SinkCommitMessage(key.sink_id, key.batch_id, key.partition_id, key.attempt, rows,
                                 rejected=rejected)

    def _commit(self, messages: Sequence[SinkCommitMessage | None], batch_id: int) -> None:
        if self.options.transactional:
            with KafkaResource(self.options, self.columns) as resource:  # nothing remote to commit
                commit_batch(resource, messages, batch_id)
        else:
            faults.point(AFTER_COMMIT)
        report_rejected(messages, batch_id, "jetkafka", "Kafka",
                        f"topic {self.options.dead_letter_topic}")


class KafkaStreamWriter(_KafkaWrite, DataSourceStreamArrowWriter):
    """Streaming writer: one producer (transaction) per task and micro-batch."""

    def __init__(self, options: KafkaSinkOptions, columns: KafkaColumns) -> None:
        self.options, self.columns = options, columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return self._write_task(task_key(self.options.sink_id), iterator)

    def commit(self, messages: list[SinkCommitMessage | None], batchId: int) -> None:
        self._commit(messages, batchId)

    def abort(self, messages: list[SinkCommitMessage | None], batchId: int) -> None:
        pass  # each task committed or aborted its own transaction


class KafkaBatchWriter(_KafkaWrite, DataSourceArrowWriter):
    """Batch writer (``df.write``): with commit=task, each task's rows in one transaction."""

    def __init__(self, options: KafkaSinkOptions, columns: KafkaColumns) -> None:
        self.options, self.columns = options, columns
        self.sink_id = options.sink_id or f"batch-{uuid.uuid4().hex}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return self._write_task(task_key(self.sink_id), iterator)

    def commit(self, messages: list[SinkCommitMessage | None]) -> None:
        self._commit(messages, 0)

    def abort(self, messages: list[SinkCommitMessage | None]) -> None:
        pass


def _parse(schema: StructType, overwrite: bool, options: Mapping[str, str]
           ) -> tuple[KafkaSinkOptions, KafkaColumns]:
    parsed = KafkaSinkOptions.parse(options)
    if overwrite:
        raise SinkError("the Kafka sink only appends (no complete output mode / SaveMode.Overwrite)")
    typed = tuple(typed_values.plan(options, schema, parsed.topic).values())
    return parsed, check_schema(schema, parsed.topic, typed)


def make_kafka_stream_writer(schema: StructType, overwrite: bool, options: Mapping[str, str]
                             ) -> KafkaStreamWriter:
    """The stream writer for ``df.writeStream.format("jetkafka")``."""
    return KafkaStreamWriter(*_parse(schema, overwrite, options))


def make_kafka_writer(schema: StructType, overwrite: bool, options: Mapping[str, str]) -> KafkaBatchWriter:
    """The batch writer for ``df.write.format("jetkafka")``."""
    return KafkaBatchWriter(*_parse(schema, overwrite, options))


class KafkaSinkMixin:
    """Adds the Kafka sink to a DataSource class (``options`` is the DataSource's)."""

    options: Mapping[str, str]

    def writer(self, schema: StructType, overwrite: bool) -> KafkaBatchWriter:
        return make_kafka_writer(schema, overwrite, self.options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> KafkaStreamWriter:
        return make_kafka_stream_writer(schema, overwrite, self.options)
