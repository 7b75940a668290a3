"""jetjdbc against a network that fails: a TCP proxy (tests/tcp_proxy.py) between the sink and
PostgreSQL stalls a connection without closing it, or resets it, at a chosen statement.

No wait lasts longer than its option (``socketTimeout``, ``connectTimeout``): the error names
the server and the option and shows no password; the partition's transaction is not left
prepared, and the next attempt writes every row exactly once.
"""

from __future__ import annotations

import psycopg
import pyarrow as pa
import pytest
from pyspark.sql import types as T

from jetspark.sinks.jdbc import sessions
from jetspark.sinks.jdbc.options import JdbcSinkOptions
from jetspark.sinks.jdbc.resource import PostgresResource
from jetspark.sinks.jdbc.target import prepare_target
from jetspark.sinks.transactional import PartitionKey, SinkError, write_partition
from tests.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SINK = "netfaults"
SCHEMA = T.StructType([T.StructField("id", T.LongType())])


@pytest.fixture
def proxy(pg_dsn: str):
    info = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    p = TcpProxy(info.get("host", "127.0.0.1"), int(info["port"]))
    sessions.close_idle()
    yield p
    sessions.close_idle()
    p.close()


SHORT = "2 seconds"
"""The timeout a test is about; every other wait keeps its default (``connectTimeout`` 30 s,
``socketTimeout`` 5 min), so a pause of a loaded machine on a path that must succeed is no failure."""


def options_via(proxy: TcpProxy, pg_dsn: str, pg_schema: str, **extra: str) -> JdbcSinkOptions:
    port = psycopg.conninfo.conninfo_to_dict(pg_dsn)["port"]
    url = pg_dsn.replace(f":{port}/", f":{proxy.port}/")
    assert url != pg_dsn, "the tests' PostgreSQL URL names no port"
    return JdbcSinkOptions.parse({"url": url, "table": f"{pg_schema}.out", "guarantee": "exactly-once",
                                  "createTable": "true", "sinkId": SINK, **extra})


def rows(ids: list[int]):
    return iter([pa.record_batch([pa.array(ids, pa.int64())], names=["id"])])


def prepared(pg_dsn: str) -> list[str]:
    with psycopg.connect(pg_dsn) as conn:
        return [r[0] for r in conn.execute("SELECT gid FROM pg_prepared_xacts WHERE gid LIKE %s",
                                           (f"jetspark:{SINK}:%",))]


def stored(pg_dsn: str, table: str) -> list[int]:
    with psycopg.connect(pg_dsn) as conn:
        return sorted(r[0] for r in conn.execute(f"SELECT id FROM {table}"))


def _password(pg_dsn: str) -> str | None:
    with psycopg.connect(pg_dsn) as conn:
        return conn.info.password or None


@pytest.mark.parametrize("statement", [b"COPY", b"PREPARE TRANSACTION"])
def test_a_stalled_task_times_out_and_its_retry_writes_once(proxy, pg_dsn, pg_schema, statement):
    options = options_via(proxy, pg_dsn, pg_schema)
    target = prepare_target(options, SCHEMA, False)
    impatient = prepare_target(options_via(proxy, pg_dsn, pg_schema, socketTimeout=SHORT), SCHEMA, False)
    proxy.stall_on(statement)
    with (pytest.raises((psycopg.Error, SinkError)) as failed,
          PostgresResource(impatient, two_phase=True) as resource):
        write_partition(resource, PartitionKey(SINK, 0, 0, 0), rows([1, 2, 3]))
    assert proxy.stalled.is_set()
    text = str(failed.value)
    assert "socketTimeout=2 s" in text and f"127.0.0.1:{proxy.port}" in text
    password = _password(pg_dsn)
    assert password is None or password not in text
    proxy.heal()  # the stalled session's server side ends: its transaction is rolled back
    with PostgresResource(target, two_phase=True) as resource:
        message = write_partition(resource, PartitionKey(SINK, 0, 0, 1), rows([1, 2, 3]))
    with PostgresResource(target, two_phase=True) as resource:
        resource.commit(message.handle)
    assert stored(pg_dsn, str(options.table)) == [1, 2, 3]
    assert prepared(pg_dsn) == []


def test_a_stalled_commit_prepared_is_tried_again_on_a_new_session(proxy, pg_dsn, pg_schema):
    options = options_via(proxy, pg_dsn, pg_schema)
    target = prepare_target(options, SCHEMA, False)
    with PostgresResource(target, two_phase=True) as resource:
        message = write_partition(resource, PartitionKey(SINK, 0, 0, 0), rows([7, 8]))
    proxy.stall_on(b"COMMIT PREPARED")
    impatient = prepare_target(options_via(proxy, pg_dsn, pg_schema, socketTimeout=SHORT), SCHEMA, False)
    with PostgresResource(impatient, two_phase=True) as resource:
        resource.commit(message.handle)  # the first session stalls; the second commits
    assert proxy.stalled.is_set()
    assert stored(pg_dsn, str(options.table)) == [7, 8]
    assert prepared(pg_dsn) == []


def test_a_connection_reset_mid_copy_fails_the_task_and_the_retry_writes_once(proxy, pg_dsn, pg_schema):
    options = options_via(proxy, pg_dsn, pg_schema)
    target = prepare_target(options, SCHEMA, False)
    proxy.reset_on(b"COPY")
    with pytest.raises((psycopg.Error, SinkError)), PostgresResource(target, two_phase=True) as resource:
        write_partition(resource, PartitionKey(SINK, 0, 0, 0), rows([4, 5]))
    assert proxy.stalled.is_set()
    with PostgresResource(target, two_phase=True) as resource:
        message = write_partition(resource, PartitionKey(SINK, 0, 0, 1), rows([4, 5]))
    with PostgresResource(target, two_phase=True) as resource:
        resource.commit(message.handle)
    assert stored(pg_dsn, str(options.table)) == [4, 5]
    assert prepared(pg_dsn) == []


def test_a_server_that_never_answers_the_handshake_fails_naming_connect_timeout(proxy, pg_dsn, pg_schema):
    options = options_via(proxy, pg_dsn, pg_schema, connectTimeout=SHORT)
    proxy.stall_connects()
    with pytest.raises(SinkError, match=r"connectTimeout=2 s") as failed:
        prepare_target(options, SCHEMA, False)
    assert f"127.0.0.1:{proxy.port}" in str(failed.value)
