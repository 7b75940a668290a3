"""jetjdbc keeps one idle PostgreSQL session per server and role in each Python process
(sinks/jdbc/sessions.py): reused when it ends cleanly, closed when it ends with an error or
a transaction open, replaced when the server ended it."""

from __future__ import annotations

import psycopg
import pyarrow as pa
import pytest
from pyspark.sql import types as T

from jetspark.sinks.jdbc import sessions
from jetspark.sinks.jdbc.options import JdbcSinkOptions
from jetspark.sinks.jdbc.resource import PostgresResource
from jetspark.sinks.jdbc.target import prepare_target
from jetspark.sinks.transactional import PartitionKey, write_partition

pytestmark = pytest.mark.integration


@pytest.fixture
def options(pg_dsn: str, pg_schema: str):
    sessions.close_idle()
    yield JdbcSinkOptions.parse({"url": pg_dsn, "table": f"{pg_schema}.out", "guarantee": "exactly-once",
                                 "createTable": "true"})
    sessions.close_idle()


def _backend(conn: psycopg.Connection) -> int:
    return conn.info.backend_pid


def test_a_clean_session_is_reused_and_one_in_a_transaction_is_not(options) -> None:
    with sessions.session(options) as conn:
        first = _backend(conn)
    with sessions.session(options, autocommit=False) as conn:
        assert _backend(conn) == first and not conn.autocommit
        conn.execute("SELECT 1")  # a transaction left open: the session is closed, not kept
    assert conn.closed
    with sessions.session(options) as conn:
        assert _backend(conn) != first


def test_a_session_that_ends_with_an_error_is_closed(options) -> None:
    with pytest.raises(ZeroDivisionError), sessions.session(options) as conn:
        kept = conn
        raise ZeroDivisionError
    assert kept.closed
    with sessions.session(options) as conn:
        assert conn is not kept


def test_a_session_the_server_ended_is_replaced(options, pg_dsn: str) -> None:
    with sessions.session(options) as conn:
        ended = _backend(conn)
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (ended,)).fetchone()[0]
    with sessions.session(options) as conn:  # the idle one fails its check: a new one answers
        assert _backend(conn) != ended
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_two_phase_tasks_and_the_driver_share_one_session(options, pg_dsn: str) -> None:
    """Preparation, two tasks that PREPARE and the driver's COMMIT PREPARED run on one backend;
    the rows land once."""
    schema = T.StructType([T.StructField("id", T.LongType())])
    target = prepare_target(options, schema, False)
    backends, gids = set(), []
    for partition in (0, 1):
        with PostgresResource(target, two_phase=True) as resource:
            message = write_partition(resource, PartitionKey("s1", 0, partition, 0),
                                      iter([pa.record_batch([pa.array([partition * 10 + 1])], names=["id"])]))
            backends.add(_backend(resource.conn))
            gids.append(message.handle)
    with PostgresResource(target, two_phase=True) as resource:
        for gid in gids:
            resource.commit(gid)
        backends.add(_backend(resource.conn))
    assert len(backends) == 1
    with psycopg.connect(pg_dsn) as conn:
        assert sorted(r[0] for r in conn.execute(f"SELECT id FROM {options.table}")) == [1, 11]
