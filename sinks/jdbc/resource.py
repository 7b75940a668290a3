"""PostgreSQL as a :class:`TransactionalResource`: COPY, a marker row, PREPARE TRANSACTION.

Global transaction ids (gids) are ``jetspark:<sink>:<batch>:<partition>:<attempt>:<nonce>``, the
nonce 128 random bits drawn when the transaction is prepared: any role can PREPARE TRANSACTION
under any gid, and a predictable one could be taken first to make the task's PREPARE fail on
every attempt. The driver commits the exact gid a task reported. Recovery (a task's leftovers,
the driver's strays) finds gids by their prefix and acts only on those prepared by the sink's
own role (the ``owner`` of ``pg_prepared_xacts``): another role's transaction under a gid like
ours is neither committed nor rolled back, nor taken for a partition's. Gids of the earlier
form, without a nonce, are still recognised (leftovers of a query started before).
The marker's primary key (sink, batch, partition) means at most one transaction per
partition can be prepared at a time, and at most one ever commits: a second attempt's
marker insert waits for the first and then fails if the first committed.

``two_phase=True`` (``commit=two-phase``) leaves the transaction prepared for the driver's
``COMMIT PREPARED``; ``two_phase=False`` (``commit=task``) commits it in the task.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import psycopg
from psycopg import errors, sql

from jetspark import faults
from jetspark.sinks.jdbc import sessions
from jetspark.sinks.jdbc.target import MARKER_COLUMNS, PostgresTarget
from jetspark.sinks.transactional import DURING_RECOVERY, PartitionKey, SinkError, TransactionalResource

if TYPE_CHECKING:  # pyarrow and the COPY with rejects: in the writing task only, not the commit runner
    import pyarrow as pa

    from jetspark.sinks.jdbc.rejected import RejectingCopy

GID_PREFIX = "jetspark"
_NONCE_RE = re.compile(r"[0-9a-f]{32}")
LOCK_WAIT_S = 60
"""How long a task's transaction waits for a lock before it fails. Two attempts of one
partition that both prepared would otherwise wait for each other forever when they belong to
two drivers on one checkpoint (each driver waits for its other task; PostgreSQL cannot see a
deadlock through a prepared transaction)."""


def gid_of(key: PartitionKey, nonce: str | None = None) -> str:
    """The gid of ``key``'s transaction: a fresh random nonce unless ``nonce`` is given."""
    return f"{_partition_prefix(key)}{key.attempt}:{nonce if nonce is not None else secrets.token_hex(16)}"


def _partition_prefix(key: PartitionKey) -> str:
    return f"{GID_PREFIX}:{key.sink_id}:{key.batch_id}:{key.partition_id}:"


def parse_gid(gid: str) -> PartitionKey | None:
    """The key a gid of ours was built from; None for other transactions' gids."""
    parts = gid.split(":")
    if len(parts) not in (5, 6) or parts[0] != GID_PREFIX:  # 5: without a nonce (earlier versions)
        return None
    if len(parts) == 6 and not _NONCE_RE.fullmatch(parts[5]):
        return None
    try:
        return PartitionKey(parts[1], int(parts[2]), int(parts[3]), int(parts[4]))
    except ValueError:
        return None


class PostgresResource(TransactionalResource):
    """One task's (or the driver's) PostgreSQL session for a ``jetjdbc`` sink."""

    def __init__(self, target: PostgresTarget, *, two_phase: bool) -> None:
        self.target = target
        self.supports_remote_commit = two_phase
        self._conn: psycopg.Connection | None = None
        self._key: PartitionKey | None = None
        self._gid: str | None = None
        self._copy: RejectingCopy | None = None

    @property
    def conn(self) -> psycopg.Connection:
        if self._conn is None:
            self._conn = sessions.take(self.target.options, autocommit=True)
        return self._conn

    # -- task side -------------------------------------------------------------------------
    def recover(self, key: PartitionKey) -> bool:
        committed = self._marker_exists(key)
        leftovers = self._prepared_gids(_partition_prefix(key))
        if committed or leftovers:
            faults.point(DURING_RECOVERY)
        for gid in leftovers:  # earlier attempts or runs of this partition: never committed
            self.rollback(gid)
        return committed

    def begin(self, key: PartitionKey) -> None:
        self._key = key
        from jetspark.sinks.jdbc.rejected import RejectingCopy

        self._copy = RejectingCopy(self.conn, self.target.copy_sql(), key, self.target.options)
        self.conn.execute("BEGIN")
        self.conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(f"{LOCK_WAIT_S}s")))

    def write(self, batch: pa.RecordBatch) -> int:
        with self._lock_waits():
            return self._require_copy().write(batch)

    @property
    def rejected(self) -> int:  # type: ignore[override]
        return self._copy.rejected if self._copy is not None else 0

    def prepare(self) -> str:
        key = self._require_key()
        with self._lock_waits():
            self.conn.execute(
                sql.SQL("INSERT INTO {} ({}) VALUES (%s, %s, %s, %s, %s)").format(
                    self.target.marker_sql, sql.SQL(MARKER_COLUMNS)),
                (key.sink_id, key.batch_id, key.partition_id, key.attempt, self._require_copy().rows))
        gid = self._gid = gid_of(key)
        if self.supports_remote_commit:
            self.conn.execute(sql.SQL("PREPARE TRANSACTION {}").format(sql.Literal(gid)))
            self._key = None
        return gid

    @contextmanager
    def _lock_waits(self) -> Iterator[None]:
        try:
            yield
        except errors.LockNotAvailable:
            key = self._require_key()
            table = ".".join(self.target.options.table.parts())
            raise SinkError(
                f"jetjdbc: partition {key.partition_id} of batch {key.batch_id} waited over {LOCK_WAIT_S} s "
                f"for a lock in {table}: another transaction holds it, often a "
                f"prepared transaction of the same partition left by another driver on this checkpoint "
                f"or a stopped attempt (pg_prepared_xacts, gid {_partition_prefix(key)}…). Restarting the "
                f"query rolls such leftovers back; run one driver per checkpoint") from None

    # -- either side -----------------------------------------------------------------------
    def commit(self, handle: str) -> None:
        if self._key is not None and handle == self._gid:  # the task's own transaction
            self.conn.execute("COMMIT")
            self._key = None
            return
        try:
            try:
                self.conn.execute(sql.SQL("COMMIT PREPARED {}").format(sql.Literal(handle)))
            except psycopg.OperationalError:  # the session broke (a server restart): once more on a new one
                self.close()
                self.conn.execute(sql.SQL("COMMIT PREPARED {}").format(sql.Literal(handle)))
        except errors.UndefinedObject:
            key = parse_gid(handle)
            if key is not None and self._marker_exists(key):
                return  # committed before (a repeated commit)
            raise SinkError(
                f"prepared transaction {handle!r} no longer exists and its marker is not committed: "
                f"it was rolled back (by a concurrent attempt of the same partition or an operator); "
                f"failing the batch so that Spark replays it") from None

    def rollback(self, handle: str | None = None) -> None:
        if handle is None:
            if self._key is not None and self._conn is not None:
                try:
                    self._conn.execute("ROLLBACK")
                except psycopg.Error:
                    self.close()  # a broken session: the server rolls the transaction back
            self._key = None
            return
        try:
            self.conn.execute(sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(handle)))
        except errors.UndefinedObject:
            pass  # already gone: committed or rolled back by someone else

    # -- driver side -----------------------------------------------------------------------
    def rollback_strays(self, sink_id: str, up_to_batch: int) -> list[str]:
        stray = []
        for gid in self._prepared_gids(f"{GID_PREFIX}:{sink_id}:"):
            key = parse_gid(gid)
            if key is not None and key.batch_id <= up_to_batch:
                self.rollback(gid)
                stray.append(gid)
        return stray

    def forget_markers(self, sink_id: str, before_batch: int) -> None:
        """Delete markers of batches Spark can no longer replay."""
        self.conn.execute(sql.SQL("DELETE FROM {} WHERE sink_id = %s AND batch_id < %s").format(
            self.target.marker_sql), (sink_id, before_batch))

    def close(self) -> None:
        if self._conn is not None:
            sessions.discard(self._conn)  # an open (unprepared) transaction is rolled back by the server
            self._conn = None

    def __exit__(self, *exc: object) -> None:
        """A session that ends without an error and with no transaction open (the task's is
        prepared or committed) stays idle in this process for the next task or micro-batch
        (:mod:`.sessions`); any other is closed."""
        if self._conn is not None and exc[0] is None and self._key is None:
            sessions.give_back(self.target.options, self._conn)
            self._conn = None
        self.close()

    # -- helpers ---------------------------------------------------------------------------
    def _require_copy(self) -> RejectingCopy:
        if self._copy is None:
            raise SinkError("no transaction is open (begin() was not called)")
        return self._copy

    def _require_key(self) -> PartitionKey:
        if self._key is None:
            raise SinkError("no transaction is open (begin() was not called)")
        return self._key

    def _marker_exists(self, key: PartitionKey) -> bool:
        row = self.conn.execute(
            sql.SQL("SELECT 1 FROM {} WHERE sink_id = %s AND batch_id = %s AND partition_id = %s").format(
                self.target.marker_sql), (key.sink_id, key.batch_id, key.partition_id)).fetchone()
        return row is not None

    def _prepared_gids(self, prefix: str) -> list[str]:
        """Our prepared transactions under ``prefix``: of this database, prepared by this role,
        in our form. Another role's under a gid like ours are not ours to finish."""
        rows = self.conn.execute(
            "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() "
            "AND owner = current_user AND starts_with(gid, %s) ORDER BY gid", (prefix,)).fetchall()
        return [gid for (gid,) in rows if parse_gid(gid) is not None]


def pending_transactions(target: PostgresTarget, sink_id: str | None = None) -> list[str]:
    """Prepared transactions of jetjdbc sinks (of ``sink_id``) on the target's database."""
    with PostgresResource(target, two_phase=True) as resource:
        return resource._prepared_gids(f"{GID_PREFIX}:{sink_id}:" if sink_id else f"{GID_PREFIX}:")
