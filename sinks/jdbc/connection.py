"""jetjdbc's PostgreSQL sessions, each wait for the server bounded.

libpq waits for ever by default: a server that stops answering without closing the
connection (a stalled network, a hung failover, a frozen proxy) would hold a task, and
with it the micro-batch, for ever. Every jetjdbc session therefore connects within
``connectTimeout`` (libpq's ``connect_timeout``) and waits at most ``socketTimeout`` for each
answer of the server and each send to it (a statement's result, a COPY chunk, a
``PREPARE TRANSACTION``, a ``COMMIT PREPARED``). When a wait runs out the session is closed —
its transaction, not prepared, is rolled back by the server once it notices — and the
error names the server and the option. The micro-batch then fails as with any lost
connection and its replay writes exactly once (docs/design.md, "Two-phase commit").
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.connection import _WAIT_INTERVAL
from psycopg.errors import _WaitTimeout

from jetspark.sinks.jdbc.options import JdbcSinkOptions
from jetspark.sinks.transactional import SinkError


class ServerTimeout(psycopg.OperationalError):
    """The server did not answer within ``socketTimeout``; the session is closed."""


class TimedConnection(psycopg.Connection):
    """A psycopg connection whose every wait for the server ends after ``socket_timeout_s``."""

    socket_timeout_s: float | None = None
    shown_server: str = "the server"

    def wait(self, gen: Any, interval: float = _WAIT_INTERVAL, timeout: float | None = None) -> Any:
        try:
            return super().wait(gen, interval=interval,
                                timeout=timeout if timeout is not None else self.socket_timeout_s)
        except _WaitTimeout:
            self.close()  # mid-message: the session cannot be used again
            raise ServerTimeout(
                f"PostgreSQL at {self.shown_server} did not answer within socketTimeout="
                f"{self.socket_timeout_s:g} s; the session was closed") from None


def _seconds(ms: int) -> str:
    return f"{ms / 1000:g} s"


def connect(options: JdbcSinkOptions, *, autocommit: bool = True) -> TimedConnection:
    """A connection to the sink's server; a failure names the server without credentials (and
    ``connectTimeout`` when it ran out)."""
    try:
        conn = TimedConnection.connect(options.conninfo, autocommit=autocommit,
                                       application_name="jetspark-sink", **options.connect_kwargs())
    except psycopg.Error as e:
        text = options.scrub(str(e))
        if "timeout expired" in text:
            text += f" (connectTimeout={_seconds(options.connect_timeout_ms)})"
        raise SinkError(f"cannot connect to PostgreSQL at {options.where}: {text}") from None
    conn.socket_timeout_s = options.socket_timeout_ms / 1000 or None
    conn.shown_server = options.where
    return conn
