"""jetjdbc's marker and dead-letter tables against a second PostgreSQL role that can create
tables in the sink's schema (as every role can in ``public`` up to PostgreSQL 14)."""

from __future__ import annotations

import uuid
from collections import Counter

import psycopg
import pyarrow as pa
import pytest
from psycopg import sql

from jetspark.sinks.jdbc import target as target_module
from jetspark.sinks.jdbc.options import JdbcSinkOptions
from jetspark.sinks.jdbc.resource import PostgresResource
from jetspark.sinks.jdbc.target import prepare_target
from jetspark.sinks.transactional import PartitionKey, SinkError, write_partition
from tests.integration.scripts.sink_ids_source import ids_schema
from tests.integration.scripts.sink_pg import id_counts, rollback_prepared_in_schema

pytestmark = pytest.mark.integration

MARKERS = """CREATE TABLE {} (sink_id text, batch_id bigint, partition_id integer, attempt integer,
                              row_count bigint, PRIMARY KEY (sink_id, batch_id, partition_id))"""
DEAD_LETTERS = """CREATE TABLE {} (sink_id text, batch_id bigint, partition_id integer, row_json text,
                                   sqlstate text, error text)"""


@pytest.fixture
def schema(pg_dsn, pg_schema):
    yield pg_schema
    leftovers = rollback_prepared_in_schema(pg_dsn, pg_schema)
    assert not leftovers, f"prepared transactions were left behind: {leftovers}"


@pytest.fixture
def other(pg_dsn, schema):
    """A second role, allowed to create tables in the schema; dropped afterwards."""
    role = f"jet_other_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role)))
        conn.execute(sql.SQL("GRANT USAGE, CREATE ON SCHEMA {} TO {}").format(
            sql.Identifier(schema), sql.Identifier(role)))
        conn.execute(sql.SQL("CREATE TABLE {} (id bigint, name text, amount float8 CHECK (amount >= 0))")
                     .format(sql.Identifier(schema, "events")))
    yield role
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {0} CASCADE; DROP ROLE {0}").format(sql.Identifier(role)))


def _as(dsn: str, role: str, *statements: sql.Composable) -> None:
    """Run ``statements`` as ``role`` (what that role could do on its own)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
        for statement in statements:
            conn.execute(statement)


def _spy(schema: str, table: str) -> sql.Composed:
    """A trigger that would run as whoever inserts: it copies each row into a table of its owner."""
    return sql.SQL("""
        CREATE TABLE {s}.seen (r text);
        CREATE FUNCTION {s}.spy() RETURNS trigger LANGUAGE plpgsql AS
            $$BEGIN INSERT INTO {s}.seen VALUES (NEW::text); RETURN NEW; END$$;
        CREATE TRIGGER spy BEFORE INSERT ON {t} FOR EACH ROW EXECUTE FUNCTION {s}.spy()""").format(
        s=sql.Identifier(schema), t=sql.Identifier(schema, table))


def _options(dsn, schema, **extra) -> JdbcSinkOptions:
    return JdbcSinkOptions.parse({"url": dsn, "table": f"{schema}.events", **extra})


def _batch(ids, bad=()):
    return pa.RecordBatch.from_pydict({"id": ids, "name": [f"row-{i}" for i in ids],
                                       "amount": [-1.0 if i in bad else 0.5 for i in ids]})


def test_a_marker_table_planted_by_another_role_is_refused_at_start(pg_dsn, schema, other):
    markers = sql.Identifier(schema, "jetspark_sink_markers")
    _as(pg_dsn, other, sql.SQL(MARKERS).format(markers), _spy(schema, "jetspark_sink_markers"),
        sql.SQL("INSERT INTO {} VALUES ('q', 0, 0, 0, 0)").format(markers))  # a forged marker
    for commit in ("two-phase", "task"):
        with pytest.raises(SinkError) as e:
            prepare_target(_options(pg_dsn, schema, commit=commit, sinkId="q"), ids_schema(), False)
        text = str(e.value)
        assert f"marker table (option markerTable) {schema}.jetspark_sink_markers" in text
        assert f"owned by role {other}, not by the sink's role" in text and "trigger(s) spy" in text
        assert "REVOKE CREATE ON SCHEMA public FROM PUBLIC" in text
    assert id_counts(pg_dsn, schema, "events") == Counter()


def test_a_dead_letter_table_of_another_role_is_refused_at_start_and_in_a_task(pg_dsn, schema, other):
    dead = sql.Identifier(schema, "events_rejected")
    options = _options(pg_dsn, schema, commit="task")
    target = prepare_target(options, ids_schema(), False)  # no dead-letter table yet: fine
    _as(pg_dsn, other, sql.SQL(DEAD_LETTERS).format(dead), _spy(schema, "events_rejected"))
    with pytest.raises(SinkError, match=rf"dead-letter table .*{schema}.events_rejected: it is owned by role "
                                        rf"{other}, .*trigger\(s\) spy"):
        prepare_target(options, ids_schema(), False)
    # a running query's first refused row finds it planted since the start
    target_module._dead_letter_tables.clear()
    with PostgresResource(target, two_phase=False) as resource, \
            pytest.raises(SinkError, match="owned by role"):
        write_partition(resource, PartitionKey("q", 0, 0, 0), iter([_batch([1, 2, 3], bad={2})]))
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute(sql.SQL("SELECT count(*) FROM {}.seen").format(
            sql.Identifier(schema))).fetchone()[0] == 0
    assert id_counts(pg_dsn, schema, "events") == Counter()


def test_own_tables_with_a_trigger_or_row_level_security_are_refused(pg_dsn, schema, other):
    markers, dead = sql.Identifier(schema, "jetspark_sink_markers"), sql.Identifier(schema, "events_rejected")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL(MARKERS).format(markers))
        conn.execute(sql.SQL(DEAD_LETTERS).format(dead))
        conn.execute(sql.SQL("GRANT TRIGGER ON {} TO {}").format(markers, sql.Identifier(other)))
        conn.execute(sql.SQL("ALTER TABLE {} ENABLE ROW LEVEL SECURITY").format(dead))
    _as(pg_dsn, other, _spy(schema, "jetspark_sink_markers"))  # allowed by the TRIGGER privilege
    with pytest.raises(SinkError, match=r"marker table .* it has the trigger\(s\) spy\. jetjdbc writes only"):
        prepare_target(_options(pg_dsn, schema, commit="two-phase"), ids_schema(), False)
    with pytest.raises(SinkError, match=r"dead-letter table .* it has row-level security enabled"):
        prepare_target(_options(pg_dsn, schema, guarantee="at-least-once", commit="none"), ids_schema(),
                       False)


def test_tables_of_a_role_the_sink_is_a_member_of_are_trusted(pg_dsn, schema, other):
    """The ownership rule: the sink's role or a role it was granted (it can act as that role)."""
    markers = sql.Identifier(schema, "jetspark_sink_markers")
    _as(pg_dsn, other, sql.SQL(MARKERS).format(markers))
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("GRANT {} TO current_user").format(sql.Identifier(other)))
    target = prepare_target(_options(pg_dsn, schema, commit="task"), ids_schema(), False)
    with PostgresResource(target, two_phase=False) as resource:
        message = write_partition(resource, PartitionKey("q", 0, 0, 0), iter([_batch([1, 2])]))
    assert message.rows == 2 and id_counts(pg_dsn, schema, "events") == Counter([1, 2])
