"""PostgreSQL sessions kept open between micro-batches: one idle session per server and role
in each Python process.

Spark reuses its Python workers (``spark.python.worker.reuse``, on by default): on the driver
one worker plans every micro-batch's write (jetjdbc checks its target there) and another
commits it, and an executor's worker runs task after task. A new session costs a TCP (and
TLS) handshake, the password exchange (SCRAM) and the backend's start — tens of ms, several
times per micro-batch. So a session that ends cleanly, with no transaction open (a task's
transaction is prepared or committed by then), stays idle in its process for the next use;
one that ends with an error, or inside a transaction, is closed. An idle session is reset and
checked with one round trip when it is taken again (``DISCARD ALL`` but for psycopg's prepared
statements: what server-side code of
the last use changed for the session — ``SET ROLE``, ``set_config(…, false)``, temporary
tables, advisory locks — is undone, settings back to the role's and connection's defaults),
and a dead one (a server restart, ``idle_session_timeout``) is replaced by a new session. The
taker's ``socketTimeout`` then applies to it, whichever sink used it before. A worker holds at most one idle
session per target server and role, so the idle sessions of a query are at most the Python
workers that run its tasks (plus two on the driver), fewer than its writing tasks at once.
"""

from __future__ import annotations

import atexit
import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg.pq import TransactionStatus

from jetspark.sinks.jdbc.options import JdbcSinkOptions

RESET = ("SET SESSION AUTHORIZATION DEFAULT; RESET ALL; CLOSE ALL; UNLISTEN *; "
         "SELECT pg_advisory_unlock_all(); DISCARD PLANS; DISCARD TEMP; DISCARD SEQUENCES")
"""DISCARD ALL but its DEALLOCATE ALL: psycopg's prepared statements stay valid (it would
still run them by name). One round trip."""
_idle: dict[str, psycopg.Connection] = {}
_lock = threading.Lock()


def _key(options: JdbcSinkOptions) -> str:
    """Which idle session fits: the same connection settings (hashed: no credential is kept
    in the key)."""
    settings = repr((options.conninfo, sorted(options.connect_kwargs().items(), key=lambda kv: kv[0])))
    return hashlib.sha256(settings.encode()).hexdigest()


def take(options: JdbcSinkOptions, *, autocommit: bool = True) -> psycopg.Connection:
    """An idle session of this process that still answers, or a new one."""
    from jetspark.sinks.jdbc.connection import connect

    key = _key(options)
    with _lock:
        conn = _idle.pop(key, None)
    if conn is not None:
        try:
            conn.socket_timeout_s = options.socket_timeout_ms / 1000 or None  # the taker's, not the last's
            conn.autocommit = True
            conn.execute(RESET)  # and the liveness check
            conn.autocommit = autocommit
            return conn
        except psycopg.Error:
            discard(conn)
    return connect(options, autocommit=autocommit)


def give_back(options: JdbcSinkOptions, conn: psycopg.Connection) -> None:
    """Keep ``conn`` idle for the next use when it is open with no transaction, else close it."""
    if conn.closed or conn.info.transaction_status != TransactionStatus.IDLE:
        discard(conn)
        return
    key = _key(options)
    with _lock:
        replaced = _idle.pop(key, None)
        _idle[key] = conn
    if replaced is not None:
        discard(replaced)


def discard(conn: psycopg.Connection) -> None:
    """Close ``conn`` (an open transaction is rolled back by the server)."""
    try:
        conn.close()
    except psycopg.Error:
        pass


@contextmanager
def session(options: JdbcSinkOptions, *, autocommit: bool = True) -> Iterator[psycopg.Connection]:
    """A session for one unit of work: given back when the block ends without an error (and
    with no transaction open), closed otherwise. Unlike psycopg's own ``with connect()``, the
    block commits its transaction itself."""
    conn = take(options, autocommit=autocommit)
    try:
        yield conn
    except BaseException:
        discard(conn)
        raise
    give_back(options, conn)


@atexit.register
def close_idle() -> None:
    """Close every idle session of this process (at its exit too: the server then sees a clean
    end of the session rather than a dropped connection)."""
    with _lock:
        conns = list(_idle.values())
        _idle.clear()
    for conn in conns:
        discard(conn)
