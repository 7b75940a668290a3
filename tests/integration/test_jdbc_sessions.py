"""jetjdbc keeps one idle PostgreSQL session per server and role in each Python process
(sinks/jdbc/sessions.py): reused when it ends cleanly, closed when it ends with an error or
a transaction open, replaced when the server ended it."""

from __future__ import annotations

import uuid

import psycopg
import pyarrow as pa
import pytest
from psycopg import sql
from pyspark.sql import types as T

from jetspark.sinks.jdbc import sessions
from jetspark.sinks.jdbc.connection import ServerTimeout
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


# --- what one use leaves in a session never reaches the next -------------------------------------

def test_the_taker_s_socket_timeout_applies_to_a_pooled_session(options, pg_dsn: str) -> None:
    with sessions.session(options) as conn:  # socketTimeout: the default 5 minutes
        first = _backend(conn)
    short = JdbcSinkOptions.parse({"url": pg_dsn, "table": str(options.table), "socketTimeout": "1 second"})
    with pytest.raises(ServerTimeout, match="socketTimeout=1 s"), sessions.session(short) as conn:
        assert _backend(conn) == first  # the same server and role: the idle session is reused
        conn.execute("SELECT pg_sleep(30)")


def test_session_settings_changed_by_server_side_code_do_not_survive(options, pg_dsn: str) -> None:
    """A trigger on the table (code of its owner, run as the sink's role) sets the role and the
    search_path for the whole session; the next use of the pooled session has neither."""
    other = f"jet_sess_{uuid.uuid4().hex[:10]}"
    schema = T.StructType([T.StructField("id", T.LongType())])
    target = prepare_target(options, schema, False)
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(other)))
        admin.execute(sql.SQL("GRANT {o} TO current_user; GRANT USAGE ON SCHEMA {s} TO {o}; "
                              "GRANT ALL ON ALL TABLES IN SCHEMA {s} TO {o}").format(
            o=sql.Identifier(other), s=sql.Identifier(options.table.schema)))
        admin.execute(sql.SQL("""
            CREATE FUNCTION {f}() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN
                PERFORM set_config('search_path', 'pg_catalog', false);
                PERFORM set_config('role', {r}, false);
                RETURN NEW; END$$;
            CREATE TRIGGER sticky AFTER INSERT ON {t} FOR EACH ROW EXECUTE FUNCTION {f}()""").format(
            f=sql.Identifier(options.table.schema, "sticky"), r=sql.Literal(other),
            t=sql.Identifier(*options.table.parts())))
        baseline = admin.execute("SELECT current_user::text, current_setting('search_path')").fetchone()
    try:
        with PostgresResource(target, two_phase=False) as resource:
            write_partition(resource, PartitionKey("s2", 0, 0, 0),
                            iter([pa.record_batch([pa.array([1])], names=["id"])]))
            used = _backend(resource.conn)
            assert resource.conn.execute("SELECT current_user::text").fetchone() == (other,)
        with sessions.session(options) as conn:
            assert _backend(conn) == used
            assert conn.execute("SELECT current_user::text, current_setting('search_path')").fetchone() \
                == baseline
    finally:
        sessions.close_idle()
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP TRIGGER sticky ON {}; DROP OWNED BY {o}; DROP ROLE {o}").format(
                sql.Identifier(*options.table.parts()), o=sql.Identifier(other)))


def test_pooled_sessions_are_never_shared_across_roles_or_servers(options, pg_dsn: str) -> None:
    """One idle session per (server, role): a sink of another role, or naming its server
    otherwise (here: the same one in libpq's key=value form), never gets a session of this one."""
    role, password = f"jet_sess_{uuid.uuid4().hex[:10]}", uuid.uuid4().hex
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(role),
                                                                        sql.Literal(password)))
    try:
        as_role = JdbcSinkOptions.parse({"url": pg_dsn, "table": str(options.table), "user": role,
                                         "password": password})
        key_value = psycopg.conninfo.make_conninfo(**psycopg.conninfo.conninfo_to_dict(pg_dsn))
        elsewhere = JdbcSinkOptions.parse({"url": key_value, "table": str(options.table)})
        seen = {}
        uses = (("sink", options), ("role", as_role), ("server", elsewhere), ("sink again", options))
        for name, opts in uses:
            with sessions.session(opts) as conn:
                seen[name] = (_backend(conn), conn.execute("SELECT session_user::text").fetchone()[0])
        assert seen["sink again"] == seen["sink"]
        assert seen["role"][1] == role and seen["role"][0] != seen["sink"][0]
        assert seen["server"][0] not in (seen["sink"][0], seen["role"][0])
    finally:
        sessions.close_idle()
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_statements_psycopg_prepared_still_run_after_the_reset(options) -> None:
    """psycopg prepares a statement run often enough and then runs it by name: the reset
    between uses must leave those prepared statements (DISCARD ALL would drop them)."""
    query = "SELECT count(*) FROM pg_class WHERE relname = %s"
    with sessions.session(options) as conn:
        first = _backend(conn)
        for _ in range(8):  # past psycopg's prepare_threshold (5)
            conn.execute(query, ("pg_class",))
    with sessions.session(options) as conn:
        assert _backend(conn) == first
        assert conn.execute(query, ("pg_class",)).fetchone() == (1,)
