"""The ``jetjdbc`` data source: PostgreSQL stream and batch writers on Arrow batches.

    df.writeStream.format("jetjdbc")
      .option("url", "postgresql://user@host:5432/db")   # or jdbc:postgresql://…
      .option("table", "public.events")
      .option("guarantee", "exactly-once")   # | at-least-once
      .option("commit", "two-phase")         # | task | upsert (+ keys); none with at-least-once
      .option("checkpointLocation", "…").start()

Commits (docs/design.md, "Sink protocol"; the words in :mod:`jetspark.sinks.guarantees`):
``two-phase`` — each task COPYs its rows and a marker into a transaction it PREPAREs; the
driver COMMITs PREPARED all of them once every task is done and rolls back every stray of the
sink. ``task`` — the same marker, committed by the task. ``upsert`` — COPY into a staging
table, then INSERT … ON CONFLICT (keys) DO UPDATE. ``none`` — plain COPY (at-least-once).
Rows always go in with COPY (Arrow → CSV in C++).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
)
from pyspark.sql.types import StructType

from jetspark import faults
from jetspark.sinks.guarantees import NONE, TWO_PHASE, UPSERT
from jetspark.sinks.jdbc.options import JdbcSinkOptions
from jetspark.sinks.jdbc.plain import copy_append, copy_upsert
from jetspark.sinks.jdbc.resource import PostgresResource
from jetspark.sinks.jdbc.target import PostgresTarget, prepare_target
from jetspark.sinks.transactional import (
    AFTER_COMMIT,
    PartitionKey,
    SinkCommitMessage,
    abort_batch,
    commit_batch,
    report_rejected,
    task_key,
    write_partition,
)

if TYPE_CHECKING:  # the commit runner (on the driver) has no use for pyarrow
    import pyarrow as pa

#: Markers of the last this many batches are kept (only the last batch can be replayed).
MARKER_RETENTION_BATCHES = 100


class _JdbcWrite:
    """What stream and batch writers share: a task's write, the driver's commit and abort."""

    target: PostgresTarget

    @property
    def options(self) -> JdbcSinkOptions:
        return self.target.options

    def _write_task(self, key: PartitionKey, batches: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        commit = self.options.commit
        if commit in (NONE, UPSERT):
            rows, rejected = (copy_append if commit == NONE else copy_upsert)(self.target, key, batches)
            return SinkCommitMessage(key.sink_id, key.batch_id, key.partition_id, key.attempt, rows,
                                     rejected=rejected)
        with PostgresResource(self.target, two_phase=commit == TWO_PHASE) as resource:
            return write_partition(resource, key, batches)

    def _commit(self, messages: Sequence[SinkCommitMessage | None], batch_id: int,
                keep_markers: int = MARKER_RETENTION_BATCHES) -> None:
        commit = self.options.commit
        if commit in (NONE, UPSERT):
            faults.point(AFTER_COMMIT)
        else:
            with PostgresResource(self.target, two_phase=commit == TWO_PHASE) as resource:
                commit_batch(resource, messages, batch_id)
                for sink_id in sorted({m.sink_id for m in messages if m is not None}):
                    resource.forget_markers(sink_id, batch_id + 1 - keep_markers)
        report_rejected(messages, batch_id, "jetjdbc", f"PostgreSQL for table {self.options.table}",
                        f"table {self.options.dead_letter_table}")

    def _abort(self, messages: Sequence[SinkCommitMessage | None]) -> None:
        if self.options.commit == TWO_PHASE:
            with PostgresResource(self.target, two_phase=True) as resource:
                abort_batch(resource, messages)


class JdbcStreamWriter(_JdbcWrite, DataSourceStreamArrowWriter):
    """Streaming writer: one transaction per task and micro-batch."""

    def __init__(self, target: PostgresTarget) -> None:
        self.target = target

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return self._write_task(task_key(self.options.sink_id), iterator)

    def commit(self, messages: list[SinkCommitMessage | None], batchId: int) -> None:
        self._commit(messages, batchId)

    def abort(self, messages: list[SinkCommitMessage | None], batchId: int) -> None:
        self._abort(messages)


class JdbcBatchWriter(_JdbcWrite, DataSourceArrowWriter):
    """Batch writer (``df.write``): with commit=two-phase the whole job commits together."""

    def __init__(self, target: PostgresTarget) -> None:
        self.target = target
        self.sink_id = target.options.sink_id or f"batch-{uuid.uuid4().hex}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return self._write_task(task_key(self.sink_id), iterator)

    def commit(self, messages: list[SinkCommitMessage | None]) -> None:
        self._commit(messages, 0, keep_markers=0)  # a batch job is never replayed

    def abort(self, messages: list[SinkCommitMessage | None]) -> None:
        self._abort(messages)


class JdbcDataSource(DataSource):
    """``format("jetjdbc")``: PostgreSQL sink (psycopg 3, COPY); see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return "jetjdbc"

    def _target(self, schema: StructType, overwrite: bool) -> PostgresTarget:
        return prepare_target(JdbcSinkOptions.parse(self.options), schema, overwrite)

    def writer(self, schema: StructType, overwrite: bool) -> JdbcBatchWriter:
        return JdbcBatchWriter(self._target(schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> JdbcStreamWriter:
        return JdbcStreamWriter(self._target(schema, overwrite))
