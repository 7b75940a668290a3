"""format("jetjdbc") against real PostgreSQL and a real local Spark."""

from __future__ import annotations

import importlib.util
import re
import shutil
import uuid
from collections import Counter
from pathlib import Path

import psycopg
import pyarrow as pa
import pytest
from psycopg import sql

from jetspark.devtools.services.postgres import password_of
from jetspark.devtools.services.registry import run_dir
from jetspark.sinks.guarantees import GIVES
from jetspark.sinks.jdbc.options import JdbcSinkOptions
from jetspark.sinks.jdbc.plain import copy_upsert
from jetspark.sinks.jdbc.resource import PostgresResource, gid_of, parse_gid
from jetspark.sinks.jdbc.target import prepare_target
from jetspark.sinks.jdbc.writer import JdbcDataSource
from jetspark.sinks.transactional import PartitionKey, SinkError, commit_batch, write_partition
from tests.integration.scripts.sink_ids_source import BAD_AMOUNT, BAD_TEXT, IdsSource, ids_schema, poisoned
from tests.integration.scripts.sink_pg import (
    PrivateServer,
    dead_letter_ids,
    dead_letters,
    id_counts,
    markers,
    prepared_in_schema,
    prepared_with_prefix,
    rollback_prepared_in_schema,
)

pytestmark = pytest.mark.integration

TOTAL, STEP = 100, 25
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def schema(pg_dsn, pg_schema):
    """A fresh schema; prepared transactions left in it are rolled back (and fail the test)."""
    yield pg_schema
    leftovers = rollback_prepared_in_schema(pg_dsn, pg_schema)
    assert not leftovers, f"prepared transactions were left behind: {leftovers}"


@pytest.fixture(scope="module")
def registered(spark):
    spark.dataSource.register(IdsSource)
    spark.dataSource.register(JdbcDataSource)
    return spark


def _create_events(dsn: str, schema: str, table: str = "events", key: bool = False) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (id bigint {}, name text, amount double precision)").format(
            sql.Identifier(schema, table), sql.SQL("PRIMARY KEY" if key else "")))


def _stream(spark, tmp_path, dsn, table, commit, total=TOTAL, step=STEP, **options):
    stream = spark.readStream.format("jetspark_test_ids").option("total", total).option("step", step).load()
    writer = (stream.writeStream.format("jetjdbc").option("url", dsn).option("table", table)
              .option("guarantee", GIVES[commit]).option("commit", commit)
              .option("checkpointLocation", str(tmp_path / f"ck-{uuid.uuid4().hex}")))
    for k, v in options.items():
        writer = writer.option(k, v)
    query = writer.start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return query


def _options(dsn, schema, table="events", **extra) -> JdbcSinkOptions:
    return JdbcSinkOptions.parse({"url": dsn, "table": f"{schema}.{table}", **extra})


def test_format_module_exposes_default_source():
    spec = importlib.util.spec_from_file_location("pyspark_jetjdbc", ROOT / "formats" / "pyspark_jetjdbc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.DefaultSource is JdbcDataSource and JdbcDataSource.name() == "jetjdbc"


def test_exactly_once_stream_commits_every_row_once(registered, pg_dsn, schema, tmp_path):
    _create_events(pg_dsn, schema)
    query = _stream(registered, tmp_path, pg_dsn, f"{schema}.events", "two-phase")
    assert id_counts(pg_dsn, schema, "events") == Counter(range(TOTAL))
    with psycopg.connect(pg_dsn) as conn:
        row = conn.execute(sql.SQL("SELECT name, amount FROM {} WHERE id = 42").format(
            sql.Identifier(schema, "events"))).fetchone()
    assert row == ("row-42", 21.0)
    marks = markers(pg_dsn, schema)
    assert {m[0] for m in marks} == {str(query.id)}  # sink id defaults to the query id
    assert [(m[1], m[2]) for m in marks] == [(b, p) for b in range(TOTAL // STEP) for p in (0, 1)]
    assert sum(m[4] for m in marks) == TOTAL
    assert prepared_in_schema(pg_dsn, schema) == []


@pytest.mark.parametrize("commit", ["task", "none"])
def test_other_commits_write_every_row(registered, pg_dsn, schema, tmp_path, commit):
    _create_events(pg_dsn, schema)
    _stream(registered, tmp_path, pg_dsn, f"{schema}.events", commit, sinkId="my-sink")
    assert id_counts(pg_dsn, schema, "events") == Counter(range(TOTAL))
    if commit == "task":
        assert {m[0] for m in markers(pg_dsn, schema)} == {"my-sink"}


def test_idempotent_converges_after_a_full_replay(registered, pg_dsn, schema, tmp_path):
    _stream(registered, tmp_path, pg_dsn, f"{schema}.events", "upsert", keys="id", createTable="true")
    _stream(registered, tmp_path, pg_dsn, f"{schema}.events", "upsert", keys="id")  # new checkpoint
    assert id_counts(pg_dsn, schema, "events") == Counter(range(TOTAL))
    with psycopg.connect(pg_dsn) as conn:
        key = conn.execute("""SELECT a.attname FROM pg_index i JOIN pg_attribute a
                              ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
                              WHERE i.indrelid = %s::regclass AND i.indisprimary""",
                           (f'"{schema}"."events"',)).fetchall()
    assert key == [("id",)]  # createTable made the keys the primary key


def test_idempotent_upsert_updates_and_last_row_of_a_key_wins(pg_dsn, schema):
    _create_events(pg_dsn, schema, key=True)
    target = prepare_target(_options(pg_dsn, schema, commit="upsert", keys="id"),
                            ids_schema(), False)
    first = pa.RecordBatch.from_pydict({"id": [1, 2], "name": ["a", "b"], "amount": [1.0, 2.0]})
    again = pa.RecordBatch.from_pydict({"id": [2, 3, 2], "name": ["b1", "c", "b2"],
                                        "amount": [2.1, 3.0, 2.2]})
    key = PartitionKey("q0", 0, 0, 0)
    assert copy_upsert(target, key, iter([first])) == (2, 0)
    assert copy_upsert(target, key, iter([again])) == (3, 0)
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(sql.SQL("SELECT id, name, amount FROM {} ORDER BY id").format(
            sql.Identifier(schema, "events"))).fetchall()
    assert rows == [(1, "a", 1.0), (2, "b2", 2.2), (3, "c", 3.0)]


def test_idempotent_without_unique_index_is_refused(pg_dsn, schema):
    _create_events(pg_dsn, schema)
    with pytest.raises(SinkError, match=r"needs a primary key or unique index on exactly \(id\)"):
        prepare_target(_options(pg_dsn, schema, commit="upsert", keys="id"), ids_schema(),
                       False)


def test_schema_mismatch_fails_before_writing_and_hides_credentials(registered, pg_dsn, schema, tmp_path):
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (id integer, name integer, note text NOT NULL)").format(
            sql.Identifier(schema, "events")))
    password = password_of(pg_dsn) or "Hunter2x"  # the real one (any, should the server trust us)
    sep = "&" if "?" in pg_dsn else "?"
    secret_url = f"{pg_dsn}{sep}sslpassword=Sup3rSecret"  # libpq uses it only with a client key
    with pytest.raises(Exception) as e:
        _stream(registered, tmp_path, secret_url, f"{schema}.events", "two-phase", password=password)
    text = str(e.value)
    assert "the DataFrame does not fit table" in text
    assert "column 'id': DataFrame type bigint cannot be written into table type integer" in text
    assert "column 'amount' of the DataFrame is not in the table" in text
    assert "table column 'note' is NOT NULL without a default" in text
    assert "Sup3rSecret" not in text and password not in text
    assert id_counts(pg_dsn, schema, "events") == Counter()


def test_connection_error_hides_credentials(pg_dsn):
    url = "postgresql://jetspark:Sup3rSecret@127.0.0.1:1/nowhere?connect_timeout=2"
    with pytest.raises(SinkError) as e:
        prepare_target(JdbcSinkOptions.parse({"url": url, "table": "t", "password": "Hunter2x"}),
                       ids_schema(), False)
    assert "cannot connect to PostgreSQL at postgresql://jetspark:***@127.0.0.1:1/nowhere" in str(e.value)
    assert "Sup3rSecret" not in str(e.value) and "Hunter2x" not in str(e.value)


def test_missing_table_error_and_create_table(pg_dsn, schema):
    with pytest.raises(SinkError, match=r"does not exist .* set the option createTable=true"):
        prepare_target(_options(pg_dsn, schema), ids_schema(), False)
    prepare_target(_options(pg_dsn, schema, createTable="true"), ids_schema(), False)
    with psycopg.connect(pg_dsn) as conn:
        cols = conn.execute("""SELECT column_name, data_type FROM information_schema.columns
                               WHERE table_schema = %s AND table_name = 'events' ORDER BY ordinal_position""",
                            (schema,)).fetchall()
    assert cols == [("id", "bigint"), ("name", "text"), ("amount", "double precision")]


def test_batch_write_exactly_once_and_overwrite_needs_idempotent(registered, pg_dsn, schema):
    _create_events(pg_dsn, schema)
    df = registered.range(0, 500, numPartitions=3).selectExpr("id", "concat('row-', id) AS name",
                                                             "id * 0.5 AS amount")
    df.write.format("jetjdbc").option("url", pg_dsn).option("table", f"{schema}.events").mode("append").save()
    assert id_counts(pg_dsn, schema, "events") == Counter(range(500))
    assert markers(pg_dsn, schema) == []  # a batch job's markers are dropped once it committed
    with pytest.raises(Exception, match=r"cannot overwrite .* use commit=upsert"):
        df.write.format("jetjdbc").option("url", pg_dsn).option("table", f"{schema}.events") \
            .mode("overwrite").save()


def _resource_write(target, key, ids) -> str | None:
    batch = pa.RecordBatch.from_pydict({"id": ids, "name": [f"row-{i}" for i in ids],
                                        "amount": [i * 0.5 for i in ids]})
    with PostgresResource(target, two_phase=True) as resource:
        return write_partition(resource, key, iter([batch]))


def test_replay_skips_committed_partitions_and_redoes_uncommitted_ones(pg_dsn, schema):
    """A driver died while committing batch 0: partition 0 committed, partition 1 prepared."""
    _create_events(pg_dsn, schema)
    target = prepare_target(_options(pg_dsn, schema), ids_schema(), False)
    first = [_resource_write(target, PartitionKey("q1", 0, p, 0), [p * 10, p * 10 + 1]) for p in (0, 1)]
    with PostgresResource(target, two_phase=True) as driver:
        driver.commit(first[0].handle)  # …and the driver is gone before committing partition 1
    assert prepared_in_schema(pg_dsn, schema) == [first[1].handle]
    # The restarted query replays batch 0 with the same offsets: new task attempts, attempt 0 again.
    replay = [_resource_write(target, PartitionKey("q1", 0, p, 0), [p * 10, p * 10 + 1]) for p in (0, 1)]
    assert replay[0].skipped and replay[0].handle is None
    assert not replay[1].skipped and parse_gid(replay[1].handle) == PartitionKey("q1", 0, 1, 0)
    with PostgresResource(target, two_phase=True) as driver:
        commit_batch(driver, replay, 0)
    assert id_counts(pg_dsn, schema, "events") == Counter([0, 1, 10, 11])
    assert prepared_in_schema(pg_dsn, schema) == []


def test_speculative_attempt_does_not_duplicate(pg_dsn, schema):
    _create_events(pg_dsn, schema)
    target = prepare_target(_options(pg_dsn, schema), ids_schema(), False)
    a0 = _resource_write(target, PartitionKey("q2", 5, 0, 0), [1, 2, 3])
    a1 = _resource_write(target, PartitionKey("q2", 5, 0, 1), [1, 2, 3])  # rolls back a0's transaction
    with PostgresResource(target, two_phase=True) as driver:
        commit_batch(driver, [a1], 5)
        commit_batch(driver, [a1], 5)  # a repeated commit is harmless
        with pytest.raises(SinkError, match="no longer exists and its marker is not committed"):
            driver.commit(gid_of(PartitionKey("q2", 6, 0, 0)))
    assert id_counts(pg_dsn, schema, "events") == Counter([1, 2, 3])
    assert a0.handle not in prepared_in_schema(pg_dsn, schema)


def test_an_attempt_blocked_by_another_drivers_prepared_one_fails_not_waits(pg_dsn, schema, monkeypatch):
    """Two drivers on one checkpoint run the same partition: B passed its recovery before A
    prepared, so B's marker waits on A's prepared transaction (while A's driver may wait on B's
    other task): B fails with a clear error after the lock wait instead of hanging."""
    from jetspark.sinks.jdbc import resource as resource_module

    monkeypatch.setattr(resource_module, "LOCK_WAIT_S", 1)
    _create_events(pg_dsn, schema)
    target = prepare_target(_options(pg_dsn, schema), ids_schema(), False)
    key = PartitionKey("q9", 0, 0, 0)
    with PostgresResource(target, two_phase=True) as b:
        assert not b.recover(key)  # nothing to recover yet
        a = _resource_write(target, key, [1, 2])  # driver A's attempt prepares
        b.begin(key)
        b.write(pa.RecordBatch.from_pydict({"id": [1, 2], "name": ["x", "y"], "amount": [0.5, 1.0]}))
        with pytest.raises(SinkError, match=r"waited over 1 s for a lock .* another driver on this"):
            b.prepare()
        b.rollback()
    assert prepared_in_schema(pg_dsn, schema) == [a.handle]
    with PostgresResource(target, two_phase=True) as driver:
        driver.rollback(a.handle)


def test_stray_prepared_transactions_are_rolled_back_by_the_driver_commit(pg_dsn, schema):
    _create_events(pg_dsn, schema)
    target = prepare_target(_options(pg_dsn, schema), ids_schema(), False)
    stray_old = _resource_write(target, PartitionKey("q3", 1, 7, 0), [700]).handle  # an older run's partition
    stray_same = _resource_write(target, PartitionKey("q3", 2, 9, 2), [900]).handle  # a lost attempt
    later = _resource_write(target, PartitionKey("q3", 3, 0, 0), [3000]).handle
    other = _resource_write(target, PartitionKey("q3x", 1, 0, 0), [5000]).handle
    winner = _resource_write(target, PartitionKey("q3", 2, 0, 0), [1])
    with PostgresResource(target, two_phase=True) as driver:
        commit_batch(driver, [winner], 2)
    pending = prepared_in_schema(pg_dsn, schema)
    assert stray_old not in pending and stray_same not in pending
    assert sorted(pending) == sorted([later, other])
    assert id_counts(pg_dsn, schema, "events") == Counter([1])
    with PostgresResource(target, two_phase=True) as driver:  # the batch-3 one is rolled back by its batch
        driver.rollback(later)
        driver.rollback(other)


@pytest.fixture
def private_server():
    server = PrivateServer(run_dir() / f"test-pg-{uuid.uuid4().hex[:8]}")
    yield server
    server.stop()
    shutil.rmtree(server.data_dir, ignore_errors=True)


def test_exactly_once_refuses_server_without_prepared_transactions(private_server):
    private_server.start(max_prepared_transactions=0)
    options = JdbcSinkOptions.parse({"url": private_server.dsn, "table": "events", "createTable": "true"})
    with pytest.raises(SinkError) as e:
        prepare_target(options, ids_schema(), False)
    message = str(e.value)
    assert re.search(r"\bmax_prepared_transactions = 0\b", message) and "use commit=task" in message
    with psycopg.connect(private_server.dsn) as conn:  # refused before creating anything
        assert conn.execute("SELECT to_regclass('events')").fetchone()[0] is None
    transactional = JdbcSinkOptions.parse({"url": private_server.dsn, "table": "events",
                                           "createTable": "true", "commit": "task"})
    prepare_target(transactional, ids_schema(), False)


def test_prepared_transactions_survive_a_server_restart_and_commit_once(private_server):
    private_server.start()
    options = JdbcSinkOptions.parse({"url": private_server.dsn, "table": "events", "createTable": "true"})
    target = prepare_target(options, ids_schema(), False)
    prepared = [_resource_write(target, PartitionKey("q4", 0, p, 0), [p, p + 100]) for p in (0, 1)]
    private_server.restart()
    assert prepared_with_prefix(private_server.dsn, "jetspark:q4:") == sorted(m.handle for m in prepared)
    with PostgresResource(target, two_phase=True) as driver:
        commit_batch(driver, prepared, 0)
    assert id_counts(private_server.dsn, "public", "events") == Counter([0, 100, 1, 101])
    assert prepared_with_prefix(private_server.dsn, "jetspark:") == []


# -- rows PostgreSQL refuses (onRejected) ----------------------------------------------------

def _create_checked_events(dsn: str, schema: str, key: bool = False) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (id bigint {}, name text, amount double precision "
                             "CHECK (amount >= 0))").format(
            sql.Identifier(schema, "events"), sql.SQL("PRIMARY KEY" if key else "")))


def _split(total: int) -> tuple[Counter, list[tuple[int, str]]]:
    """The ids the table keeps, and (id, sqlstate) of those it refuses."""
    bad = {i: ("22021" if i % 10 == BAD_TEXT else "23514") for i in range(total)
           if i % 10 in (BAD_TEXT, BAD_AMOUNT)}
    return Counter(i for i in range(total) if i not in bad), sorted(bad.items())


def test_rejected_rows_go_to_the_dead_letter_table_once_and_the_stream_goes_on(registered, pg_dsn, schema,
                                                                              tmp_path):
    _create_checked_events(pg_dsn, schema)
    stream = poisoned(registered.readStream.format("jetspark_test_ids").option("total", TOTAL)
                       .option("step", STEP).load())
    query = (stream.writeStream.format("jetjdbc").option("url", pg_dsn).option("table", f"{schema}.events")
             .option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    kept, refused = _split(TOTAL)
    assert id_counts(pg_dsn, schema, "events") == kept
    letters = dead_letters(pg_dsn, schema)
    assert [(i, state) for i, state, *_ in letters] == refused
    assert {b for _, _, b, _, _ in letters} == set(range(TOTAL // STEP))  # every batch had some
    assert all(name == f"row-{i}\x00" for i, state, _, _, name in letters if state == "22021")
    assert sum(m[4] for m in markers(pg_dsn, schema)) == sum(kept.values())  # markers count rows kept
    assert prepared_in_schema(pg_dsn, schema) == []


@pytest.mark.parametrize("commit", ["task", "upsert", "none"])
def test_every_commit_sets_rejected_rows_aside(registered, pg_dsn, schema, commit):
    _create_checked_events(pg_dsn, schema, key=commit == "upsert")
    df = poisoned(registered.range(0, TOTAL, numPartitions=3).selectExpr(
        "id", "concat('row-', id) AS name", "id * 0.5 AS amount"))
    writer = (df.write.format("jetjdbc").option("url", pg_dsn).option("table", f"{schema}.events")
              .option("guarantee", GIVES[commit]).option("commit", commit)
              .option("deadLetterTable", f"{schema}.bad_rows").mode("append"))
    if commit == "upsert":
        writer = writer.option("keys", "id")
    writer.save()
    kept, refused = _split(TOTAL)
    assert id_counts(pg_dsn, schema, "events") == kept
    assert [(i, state) for i, state, *_ in dead_letters(pg_dsn, schema, "bad_rows")] == refused


def test_on_rejected_fail_stops_the_query_naming_the_row_and_writes_nothing(registered, pg_dsn, schema,
                                                                           tmp_path):
    _create_checked_events(pg_dsn, schema)
    password = password_of(pg_dsn) or "Hunter2x"
    stream = poisoned(registered.readStream.format("jetspark_test_ids").option("total", TOTAL)
                       .option("step", STEP).load())
    query = (stream.writeStream.format("jetjdbc").option("url", pg_dsn).option("password", password)
             .option("table", f"{schema}.events").option("onRejected", "fail")
             .option("checkpointLocation", str(tmp_path / "ck")).start())
    with pytest.raises(Exception) as e:
        query.processAllAvailable()
    query.stop()
    text = str(e.value)
    # the task that fails first names its row: id 3 is row 3 of partition 0, id 13 row 1 of partition 1
    assert re.search(r"PostgreSQL refused row (3 of batch 0, partition 0|1 of batch 0, partition 1) ", text)
    assert "(SQLSTATE 22021)" in text
    assert "onRejected=dead-letter (the default)" in text and password not in text
    assert id_counts(pg_dsn, schema, "events") == Counter()  # the batch's other partition rolled back
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT to_regclass(%s)", (f"{schema}.events_rejected",)).fetchone()[0] is None


def test_a_foreign_key_refusal_without_a_line_is_found_by_halving(pg_dsn, schema):
    """PostgreSQL checks a foreign key at the end of the COPY and names no line: the rows are
    halved until each refused one is alone."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        known = sql.Identifier(schema, "known")
        conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY)").format(known))
        conn.execute(sql.SQL("INSERT INTO {} SELECT generate_series(0, 99, 2)").format(known))
        conn.execute(sql.SQL("CREATE TABLE {} (id bigint REFERENCES {}, name text, amount float8)").format(
            sql.Identifier(schema, "events"), known))
    target = prepare_target(_options(pg_dsn, schema), ids_schema(), False)
    ids = [0, 2, 5, 4, 6, 8, 9, 10, 12, 14, 16, 17, 18]
    message = _resource_write(target, PartitionKey("q5", 0, 0, 0), ids)
    assert (message.rows, message.rejected) == (10, 3)
    with PostgresResource(target, two_phase=True) as driver:
        commit_batch(driver, [message], 0)
    assert id_counts(pg_dsn, schema, "events") == Counter(i for i in ids if i % 2 == 0)
    assert [(i, state) for i, state, *_ in dead_letters(pg_dsn, schema)] == [
        (5, "23503"), (9, "23503"), (17, "23503")]


def test_a_refused_row_after_several_savepoint_windows_keeps_every_other_row_once(pg_dsn, schema,
                                                                                  monkeypatch):
    """The batches since the last savepoint are copied again after a refusal: each row of a
    task is written once, in the table or as a dead letter."""
    from jetspark.sinks.jdbc import rejected

    monkeypatch.setattr(rejected, "WINDOW_ROWS", 4)  # a savepoint every two batches of three rows
    _create_checked_events(pg_dsn, schema)
    target = prepare_target(_options(pg_dsn, schema), ids_schema(), False)
    batches = [pa.RecordBatch.from_pydict({"id": ids, "name": [f"row-{i}" for i in ids],
                                           "amount": [-1.0 if i in (7, 16) else 0.5 for i in ids]})
               for ids in ([0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11], [12, 13, 14], [15, 16, 17])]
    with PostgresResource(target, two_phase=True) as resource:
        message = write_partition(resource, PartitionKey("q6", 0, 0, 0), iter(batches))
    assert (message.rows, message.rejected) == (16, 2)
    with PostgresResource(target, two_phase=True) as driver:
        commit_batch(driver, [message], 0)
    assert id_counts(pg_dsn, schema, "events") == Counter(i for i in range(18) if i not in (7, 16))
    assert [(i, state) for i, state, *_ in dead_letters(pg_dsn, schema)] == [(7, "23514"), (16, "23514")]


def test_a_row_whose_parent_comes_later_in_the_batch_is_not_a_dead_letter(pg_dsn, schema):
    """Copied in pieces, a row whose foreign key names a later row of the batch is refused
    alone; it is tried again after the rest of the batch and kept."""
    from pyspark.sql import types as T

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {0} (id bigint PRIMARY KEY, parent bigint REFERENCES {0}, "
                             "name text)").format(sql.Identifier(schema, "events")))
    spark_schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("parent", T.LongType()),
                                 T.StructField("name", T.StringType())])
    target = prepare_target(_options(pg_dsn, schema), spark_schema, False)
    batch = pa.RecordBatch.from_pydict({"id": [1, 2, 3, 4, 5], "parent": [None, 5, None, 99, 1],
                                        "name": ["a", "b", "c\x00", "d", "e"]})  # 3's NUL splits the batch
    with PostgresResource(target, two_phase=True) as resource:
        message = write_partition(resource, PartitionKey("q7", 0, 0, 0), iter([batch]))
    assert (message.rows, message.rejected) == (3, 2)
    with PostgresResource(target, two_phase=True) as driver:
        commit_batch(driver, [message], 0)
    assert id_counts(pg_dsn, schema, "events") == Counter([1, 2, 5])
    assert [(i, state) for i, state, *_ in dead_letters(pg_dsn, schema)] == [(3, "22021"), (4, "23503")]


class _SubxactModel:
    """PostgreSQL's subtransactions of one session, followed from the statements it sends: a
    savepoint that writes takes a subtransaction id (its open ancestors too); releasing it
    keeps the id alive until the transaction ends, rolling it back frees it and its children's.
    ``most`` is the largest number alive at once (PostgreSQL caches 64)."""

    def __init__(self) -> None:
        self.frames: list[list] = [["", False, 0]]  # [name, has_xid, ids alive of released children]
        self.most = 0

    def statement(self, text: str) -> None:
        for part in filter(None, (p.strip() for p in text.split(";"))):
            words = part.replace('"', "").split()
            head = " ".join(words[:3]).upper()
            if words[0].upper() == "SAVEPOINT":
                self.frames.append([words[1], False, 0])
            elif head.startswith("RELEASE SAVEPOINT"):
                while True:
                    name, has_xid, children = self.frames.pop()
                    self.frames[-1][2] += children + has_xid
                    if name == words[2]:
                        break
            elif head.startswith("ROLLBACK TO SAVEPOINT"):
                while self.frames[-1][0] != words[3]:
                    self.frames.pop()
                self.frames[-1][1:] = [False, 0]
            elif words[0].upper() in ("COPY", "INSERT"):
                for frame in self.frames:
                    frame[1] = True
                self.most = max(self.most, sum(f[1] + f[2] for f in self.frames) - 1)  # but the top
            elif words[0].upper() in ("COMMIT", "ROLLBACK", "PREPARE", "BEGIN"):
                self.frames = [["", False, 0]]


class _Traced:
    """A psycopg connection (or cursor) whose statements go through a :class:`_SubxactModel`."""

    def __init__(self, inner, model: _SubxactModel) -> None:
        self._inner, self._model = inner, model

    def _see(self, query) -> None:
        self._model.statement(query if isinstance(query, str) else query.as_string(self._inner))

    def execute(self, query, *args, **kwargs):
        self._see(query)
        return self._inner.execute(query, *args, **kwargs)

    def executemany(self, query, *args, **kwargs):
        self._see(query)
        return self._inner.executemany(query, *args, **kwargs)

    def copy(self, statement, *args, **kwargs):
        self._see(statement)
        return self._inner.copy(statement, *args, **kwargs)

    def cursor(self, *args, **kwargs):
        return _Traced(self._inner.cursor(*args, **kwargs), self._model)

    def __enter__(self):
        self._inner.__enter__()
        return self

    def __exit__(self, *exc):
        return self._inner.__exit__(*exc)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def test_many_refused_rows_in_one_batch_keep_within_64_subtransactions(pg_dsn, schema):
    """A batch with 150 refused rows among good ones is probed in over 150 pieces; PostgreSQL
    keeps a released savepoint's subtransaction until the end, so the pieces must not all stay
    alive: never more than 64 at once (its cache), and every row is accounted for once."""
    from jetspark.sinks.jdbc.connection import connect

    _create_checked_events(pg_dsn, schema)
    target = prepare_target(_options(pg_dsn, schema), ids_schema(), False)
    ids = list(range(450))
    bad = {i for i in ids if i % 3 == 1}
    batch = pa.RecordBatch.from_pydict({"id": ids, "name": [f"row-{i}" for i in ids],
                                        "amount": [-1.0 if i in bad else 0.5 for i in ids]})
    model = _SubxactModel()
    with PostgresResource(target, two_phase=True) as resource:
        resource._conn = _Traced(connect(target.options, autocommit=True), model)
        message = write_partition(resource, PartitionKey("q8", 0, 0, 0), iter([batch, batch.slice(0, 9)]))
    assert (message.rows, message.rejected) == (306, 153)
    assert 0 < model.most <= 64, model.most
    with PostgresResource(target, two_phase=True) as driver:
        commit_batch(driver, [message], 0)
    good = Counter(i for i in ids if i not in bad) + Counter(i for i in range(9) if i not in bad)
    assert id_counts(pg_dsn, schema, "events") == good
    assert dead_letter_ids(pg_dsn, schema) == Counter(bad) + Counter(i for i in range(9) if i in bad)
