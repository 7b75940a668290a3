"""jetjdbc against a second PostgreSQL role: one that can create tables in the sink's schema (as
every role can in ``public`` up to PostgreSQL 14) plants marker and dead-letter tables; any role
can PREPARE TRANSACTION under a gid like the sink's."""

from __future__ import annotations

import contextlib
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


@pytest.fixture
def sink_role(pg_dsn, schema):
    """The sink's own role, no superuser (a superuser may finish any role's prepared transaction)."""
    role, password = f"jet_sink_{uuid.uuid4().hex[:10]}", uuid.uuid4().hex
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
            sql.Identifier(role), sql.Literal(password)))
        conn.execute(sql.SQL("GRANT USAGE, CREATE ON SCHEMA {} TO {}").format(
            sql.Identifier(schema), sql.Identifier(role)))
    yield role, password
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {0} CASCADE; DROP ROLE {0}").format(sql.Identifier(role)))


def test_a_gid_squatted_by_another_role_neither_stalls_nor_misleads_the_sink(pg_dsn, schema, other,
                                                                            sink_role):
    """Another role prepares transactions under the gids the partition's would have had (the
    earlier predictable form, and one in the new form with a made-up nonce): the task prepares
    its own, recovery and the driver's stray rollback leave the squatters alone, and the batch
    commits once."""
    from jetspark.sinks.jdbc.resource import gid_of, parse_gid
    from jetspark.sinks.transactional import commit_batch

    role, password = sink_role
    sink = f"sq{uuid.uuid4().hex[:8]}"
    key = PartitionKey(sink, 0, 0, 0)
    squatted = [f"jetspark:{sink}:0:0:0", gid_of(key, "0" * 32), f"jetspark:{sink}:0:1:0"]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(other)))
        for gid in squatted:
            conn.execute("BEGIN")
            conn.execute(sql.SQL("PREPARE TRANSACTION {}").format(sql.Literal(gid)))
    try:
        options = JdbcSinkOptions.parse({"url": pg_dsn, "table": f"{schema}.sq", "createTable": "true",
                                         "user": role, "password": password})
        target = prepare_target(options, ids_schema(), False)
        with PostgresResource(target, two_phase=True) as resource:
            message = write_partition(resource, key, iter([_batch([1, 2, 3])]))
        assert parse_gid(message.handle) == key and message.handle not in squatted
        with PostgresResource(target, two_phase=True) as driver:
            commit_batch(driver, [message], 0)
            assert not driver.recover(PartitionKey(sink, 0, 1, 0))  # not ours: not a leftover
        assert id_counts(pg_dsn, schema, "sq") == Counter([1, 2, 3])
        with psycopg.connect(pg_dsn) as conn:
            left = conn.execute("SELECT gid, owner FROM pg_prepared_xacts WHERE starts_with(gid, %s) "
                                "ORDER BY 1", (f"jetspark:{sink}:",)).fetchall()
        assert left == sorted((gid, other) for gid in squatted)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            for gid in squatted:
                with contextlib.suppress(psycopg.errors.UndefinedObject):
                    conn.execute(sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(gid)))


# --- the target table: its owner's code, and a name found through search_path -------------------

def _seen(dsn: str, schema: str) -> int:
    with psycopg.connect(dsn) as conn:
        query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, "seen"))
        return conn.execute(query).fetchone()[0]


def test_a_target_table_of_another_role_is_warned_about_or_refused(pg_dsn, schema, other, caplog):
    """Its owner's trigger runs as the sink's role on every write: a warning by default, a
    refusal before any row with trustTableOwner=false."""
    table = sql.Identifier(schema, "theirs")
    _as(pg_dsn, other, sql.SQL("CREATE TABLE {} (id bigint, name text, amount float8)").format(table),
        _spy(schema, "theirs"), sql.SQL("GRANT SELECT, INSERT ON {} TO PUBLIC").format(table))
    raw = {"url": pg_dsn, "table": f"{schema}.theirs", "commit": "task"}
    with pytest.raises(SinkError) as e:
        prepare_target(JdbcSinkOptions.parse({**raw, "trustTableOwner": "false"}), ids_schema(), False)
    text = str(e.value)
    assert f"table {schema}.theirs" in text and f"owned by role {other}" in text
    assert "triggers" in text and "trustTableOwner=false" in text
    assert id_counts(pg_dsn, schema, "theirs") == Counter() and _seen(pg_dsn, schema) == 0
    with caplog.at_level("WARNING", logger="jetspark.sinks.jdbc.target"):
        target = prepare_target(JdbcSinkOptions.parse(raw), ids_schema(), False)
    assert any(f"owned by role {other}" in r.getMessage() and "trustTableOwner=false" in r.getMessage()
               for r in caplog.records)
    with PostgresResource(target, two_phase=False) as resource:
        write_partition(resource, PartitionKey("q", 0, 0, 0), iter([_batch([1, 2])]))
    assert id_counts(pg_dsn, schema, "theirs") == Counter([1, 2])


def test_an_unqualified_table_is_resolved_once_and_never_shadowed(pg_dsn, schema, other, sink_role):
    """The sink's role looks names up in (shadow, schema); its table and markers are in schema.
    After the start, another role creates tables of the same names in shadow, a trigger on one
    and a forged marker in the other: the writes still go to the sink's own tables."""
    role, password = sink_role
    shadow = f"{schema}_shadow"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {s}; GRANT USAGE, CREATE ON SCHEMA {s} TO {o}; GRANT USAGE ON "
                             "SCHEMA {s} TO {r}; ALTER ROLE {r} SET search_path = {s}, {t}").format(
            s=sql.Identifier(shadow), o=sql.Identifier(other), r=sql.Identifier(role),
            t=sql.Identifier(schema)))
    try:
        _as(pg_dsn, role, sql.SQL("CREATE TABLE {} (id bigint, name text, amount float8)").format(
            sql.Identifier(schema, "mine")),
            sql.SQL(MARKERS).format(sql.Identifier(schema, "jetspark_sink_markers")))
        options = JdbcSinkOptions.parse({"url": pg_dsn, "table": "mine", "commit": "task", "sinkId": "sp",
                                         "user": role, "password": password})
        target = prepare_target(options, ids_schema(), False)
        mine, markers = sql.Identifier(shadow, "mine"), sql.Identifier(shadow, "jetspark_sink_markers")
        _as(pg_dsn, other, sql.SQL("CREATE TABLE {} (id bigint, name text, amount float8)").format(mine),
            _spy(shadow, "mine"), sql.SQL(MARKERS).format(markers),
            sql.SQL("INSERT INTO {} VALUES ('sp', 0, 1, 0, 0)").format(markers),  # a forged marker
            sql.SQL("GRANT SELECT, INSERT ON {}, {} TO PUBLIC").format(mine, markers))
        with PostgresResource(target, two_phase=False) as resource:
            for partition, ids in ((0, [1, 2]), (1, [3])):
                write_partition(resource, PartitionKey("sp", 0, partition, 0), iter([_batch(ids)]))
        assert id_counts(pg_dsn, schema, "mine") == Counter([1, 2, 3])
        assert id_counts(pg_dsn, shadow, "mine") == Counter() and _seen(pg_dsn, shadow) == 0
        assert target.options.table.parts() == (schema, "mine")
        assert target.options.marker_table.parts() == (schema, "jetspark_sink_markers")
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(shadow)))
