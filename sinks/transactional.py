"""The transactional-resource protocol shared by the exactly-once sinks, and the algorithm on it.

A sink partition's write is one transaction of a :class:`TransactionalResource`:

    task:    recover(key) → begin(key) → write(batch)… → prepare() → [commit(handle)]
    driver:  commit(handle) for every task's handle → rollback_strays(sink_id, batch_id)

``key`` is (sink id, batch id, partition id, attempt). ``prepare`` makes the written rows and
a *marker* for (sink id, batch id, partition id) durable but invisible, and returns a handle
(a transaction name, free of credentials). Resources that can commit a prepared transaction
from another process (PostgreSQL ``COMMIT PREPARED``) let the driver commit, once every task
has prepared: exactly-once. Those that cannot (Kafka, see KIP-939) commit in the task.
``recover`` runs first in every task: it resolves what earlier attempts or runs left behind
for the same (sink, batch, partition) and tells whether the marker is already committed, in
which case the partition of a replayed batch is skipped.

A third resource (MariaDB XA, …) is a new subclass; the algorithm below stays as it is.
"""

from __future__ import annotations

import itertools
import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql.datasource import WriterCommitMessage

from jetspark import faults
from jetspark.errors import JetsparkError

if TYPE_CHECKING:  # a commit runner (on the driver) has no use for pyarrow
    import pyarrow as pa

# Fault-injection points (jetspark.faults) of every sink.
DURING_WRITE = "sink.during_write"
AFTER_PREPARE = "sink.after_prepare"
DURING_COMMIT = "sink.during_commit"
AFTER_COMMIT = "sink.after_commit"
DURING_RECOVERY = "sink.during_recovery"

log = logging.getLogger(__name__)

SINK_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
SINK_ID_ACCEPTED = "1 to 100 characters of A-Z a-z 0-9 _ . - (default: the streaming query id)"


class SinkError(JetsparkError):
    """A sink could not write or commit; the message never contains credentials."""


@dataclass(frozen=True)
class PartitionKey:
    """Which transaction a task attempt runs: one per (sink, batch, partition, attempt)."""

    sink_id: str
    batch_id: int
    partition_id: int
    attempt: int


@dataclass(frozen=True)
class SinkCommitMessage(WriterCommitMessage):
    """What a task reports to the driver: its key, rows written and the prepared handle.

    ``handle`` is None when nothing is left for the driver to commit (the task committed
    itself, or the partition was skipped because its marker was already committed).
    """

    sink_id: str
    batch_id: int
    partition_id: int
    attempt: int
    rows: int
    handle: str | None = None
    skipped: bool = False
    rejected: int = 0
    """Rows the target refused, written to its dead letters instead (``onRejected``)."""


class TransactionalResource(ABC):
    """One external system's transactions, as the sink algorithm needs them.

    Implementations keep configuration apart from their per-task state, never put
    credentials into handles or error messages, and are used as context managers (the
    connection is closed on exit; an unfinished transaction is rolled back).
    """

    #: Whether ``commit(handle)`` may run in another process than ``prepare`` (2PC).
    supports_remote_commit: bool
    #: Rows of the open transaction the target refused and ``write`` kept as dead letters.
    rejected: int = 0

    @abstractmethod
    def recover(self, key: PartitionKey) -> bool:
        """Resolve leftovers of other attempts of ``key``'s partition; True if committed."""

    @abstractmethod
    def begin(self, key: PartitionKey) -> None:
        """Start the transaction of ``key``."""

    @abstractmethod
    def write(self, batch: pa.RecordBatch) -> int:
        """Write ``batch`` inside the transaction; return the number of rows written (rows the
        target refuses count in ``rejected`` instead)."""

    @abstractmethod
    def prepare(self) -> str:
        """Write the marker and make the transaction durable; return its commit handle."""

    @abstractmethod
    def commit(self, handle: str) -> None:
        """Commit a prepared transaction (idempotent where the system allows)."""

    @abstractmethod
    def rollback(self, handle: str | None = None) -> None:
        """Roll back the open transaction, or the prepared one named ``handle``."""

    @abstractmethod
    def rollback_strays(self, sink_id: str, up_to_batch: int) -> list[str]:
        """Roll back every prepared transaction of ``sink_id`` for batches <= ``up_to_batch``."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections (rolling back an unfinished transaction)."""

    def __enter__(self) -> TransactionalResource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _with_rows(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch] | None:
    """``batches`` from the first one with rows on, or None when none has a row (all consumed)."""
    it = iter(batches)
    for batch in it:
        if batch.num_rows:
            return itertools.chain((batch,), it)
    return None


def write_partition(
    resource: TransactionalResource, key: PartitionKey, batches: Iterable[pa.RecordBatch]
) -> SinkCommitMessage:
    """Run one task's transaction; with remote commit, leave it prepared for the driver.

    A partition without rows opens no transaction and writes no marker: a replay of it has
    no rows either (replays are deterministic), so there is nothing to write once. This
    keeps a batch's prepared transactions to its partitions with rows (Spark's default of
    200 shuffle partitions would otherwise hold 200 of PostgreSQL's
    ``max_prepared_transactions`` per micro-batch) and costs an empty task no connection."""
    batches = _with_rows(batches)
    if batches is None:
        return SinkCommitMessage(key.sink_id, key.batch_id, key.partition_id, key.attempt, 0)
    if resource.recover(key):
        for _ in batches:  # the replayed partition is already in the sink: consume, skip
            pass
        return SinkCommitMessage(key.sink_id, key.batch_id, key.partition_id, key.attempt, 0,
                                 skipped=True)
    resource.begin(key)
    rows = 0
    try:
        for batch in batches:
            if batch.num_rows:
                rows += resource.write(batch)
                faults.point(DURING_WRITE)
        handle = resource.prepare()
    except BaseException:
        resource.rollback()
        raise
    faults.point(AFTER_PREPARE)
    if not resource.supports_remote_commit:
        resource.commit(handle)
        handle = None
    return SinkCommitMessage(key.sink_id, key.batch_id, key.partition_id, key.attempt, rows,
                             handle=handle, rejected=resource.rejected)


def commit_batch(
    resource: TransactionalResource, messages: Sequence[SinkCommitMessage | None], batch_id: int
) -> None:
    """Driver side: commit every task's prepared handle, then roll back the strays."""
    present = [m for m in messages if m is not None]
    handles = [m.handle for m in present if m.handle is not None]
    for i, handle in enumerate(handles):
        resource.commit(handle)
        if i == 0 and len(handles) > 1:
            faults.point(DURING_COMMIT)
    for sink_id in sorted({m.sink_id for m in present}):
        resource.rollback_strays(sink_id, batch_id)
    faults.point(AFTER_COMMIT)


def abort_batch(resource: TransactionalResource, messages: Sequence[SinkCommitMessage | None]) -> None:
    """Driver side: roll back every prepared handle of a failed batch."""
    for m in messages:
        if m is not None and m.handle is not None:
            resource.rollback(m.handle)


def task_key(default_sink_id: str | None, fallback_batch_id: int = 0) -> PartitionKey:
    """The key of the running task: sink id (default: the query id), batch, partition, attempt."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise SinkError("a sink write must run inside a Spark task")
    sink_id = default_sink_id or ctx.getLocalProperty("sql.streaming.queryId")
    if not sink_id:
        raise SinkError("no sink id: set the option 'sinkId' (no streaming query id is available)")
    batch = ctx.getLocalProperty("streaming.sql.batchId")
    return PartitionKey(sink_id, int(batch) if batch is not None else fallback_batch_id,
                        ctx.partitionId(), ctx.attemptNumber())


def report_rejected(messages: Sequence[SinkCommitMessage | None], batch_id: int, sink: str, target: str,
                    dead_letters: str) -> int:
    """Say on the driver, once a batch is committed, how many of its records went to the
    dead letters (``onRejected``); the number."""
    n = sum(m.rejected for m in messages if m is not None)
    if n:
        log.warning("%s: %d record(s) of batch %d refused by %s were written to the dead-letter %s",
                    sink, n, batch_id, target, dead_letters)
    return n
