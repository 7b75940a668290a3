"""jetjdbc under crashes: the driver is SIGKILLed at each sink fault point, the query is
restarted on the same checkpoint until it completes, and every row is in the table once."""

from __future__ import annotations

import shutil
import uuid
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from jetspark.devtools.services.registry import run_dir
from tests.faults_harness import run_script
from tests.integration.scripts.sink_ids_source import BAD_AMOUNT, BAD_TEXT
from tests.integration.scripts.sink_pg import (
    PrivateServer,
    dead_letter_ids,
    id_counts,
    markers,
    prepared_in_schema,
    rollback_prepared_in_schema,
)

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).parent / "scripts" / "sink_jdbc_query.py"
TOTAL, STEP = 40, 20  # two micro-batches of two partitions each


@pytest.fixture
def schema(pg_dsn, pg_schema):
    yield pg_schema
    leftovers = rollback_prepared_in_schema(pg_dsn, pg_schema)
    assert not leftovers, f"prepared transactions were left behind: {leftovers}"


def _table(dsn: str, schema: str, key: bool = False, check: str = "") -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (id bigint {}, name text, amount double precision {})").format(
            sql.Identifier(schema, "events"), sql.SQL("PRIMARY KEY" if key else ""), sql.SQL(check)))
    return f"{schema}.events"


def _run_chain(tmp_path, dsn, schema, commit, faults, *extra_args, env=None):
    """Kill the query at each fault in turn (same checkpoint), then let it complete."""
    checkpoint = tmp_path / "checkpoint"
    args = [dsn, f"{schema}.events", str(checkpoint), commit, str(TOTAL), str(STEP), *extra_args]
    for fault in faults:
        run = run_script(SCRIPT, *args, fault=fault, state_dir=tmp_path, env=env)
        assert run.killed, f"{fault} was not reached (rc={run.returncode}):\n{run.output[-3000:]}"
        counts = id_counts(dsn, schema, "events") + dead_letter_ids(dsn, schema)
        assert all(c == 1 for c in counts.values()), f"duplicates after a kill at {fault}: {counts}"
    run_script(SCRIPT, *args, state_dir=tmp_path, env=env).check_ok()


TWO_PHASE_KILLS = [
    "sink.during_write@1",      # a task is writing: nothing prepared yet
    "sink.after_prepare@2",     # both tasks prepared, the driver never commits
    "sink.during_recovery@1",   # the restarted tasks find those prepared transactions
    "sink.during_commit@1",     # the driver committed one partition of the batch, not the other
    "sink.after_commit@2",      # batch 1 is in the table, Spark has not recorded it
]
# Soak cases (the suite's time budget: a slice a run): the points only two-phase commit has, and
# every point in turn; every make test kills the two-phase sink in
# test_transactional_survives_driver_kills and test_service_faults_postgres.py
TWO_PHASE_CHAINS = [
    pytest.param(TWO_PHASE_KILLS[1:4], id="prepared-recovery-commit", marks=pytest.mark.soak),
    pytest.param(TWO_PHASE_KILLS, id="every-point", marks=pytest.mark.soak),
]


@pytest.mark.parametrize("kills", TWO_PHASE_CHAINS)
def test_exactly_once_survives_driver_kills_at_every_point(pg_dsn, schema, tmp_path, kills):
    """Some rows are refused by the table (``poisoned``): they are dead letters, committed with
    their partition, so each row ends up once, in the table or in the dead-letter table."""
    _table(pg_dsn, schema, check="CHECK (amount >= 0)")
    _run_chain(tmp_path, pg_dsn, schema, "two-phase", kills, env={"SINK_POISON": "1"})
    refused = [i for i in range(TOTAL) if i % 10 in (BAD_TEXT, BAD_AMOUNT)]
    assert id_counts(pg_dsn, schema, "events") == Counter(i for i in range(TOTAL) if i not in refused)
    assert dead_letter_ids(pg_dsn, schema) == Counter(refused)
    marks = markers(pg_dsn, schema)
    assert len({m[0] for m in marks}) == 1  # the query id (sink id) is stable across restarts
    assert [(m[1], m[2]) for m in marks] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert prepared_in_schema(pg_dsn, schema) == []


def test_transactional_survives_driver_kills(pg_dsn, schema, tmp_path):
    _table(pg_dsn, schema)
    _run_chain(tmp_path, pg_dsn, schema, "task", ["sink.after_commit@1"])  # replay skipped by marker
    assert id_counts(pg_dsn, schema, "events") == Counter(range(TOTAL))


@pytest.mark.soak  # the suite's time budget: upserts converge by design (a replay rewrites the rows)
def test_idempotent_converges_after_driver_kills(pg_dsn, schema, tmp_path):
    _table(pg_dsn, schema, key=True)
    _run_chain(tmp_path, pg_dsn, schema, "upsert", ["sink.during_write@2", "sink.after_commit@1"])
    assert id_counts(pg_dsn, schema, "events") == Counter(range(TOTAL))


def test_retried_task_attempt_does_not_duplicate(pg_dsn, schema, tmp_path):
    """The fault kills only the Python worker that prepared (``:worker``): the task attempt
    fails after PREPARE and Spark retries it (local[2,4])."""
    _table(pg_dsn, schema)
    args = [pg_dsn, f"{schema}.events", str(tmp_path / "checkpoint"), "two-phase", str(TOTAL), str(STEP),
            "local[2,4]"]
    run = run_script(SCRIPT, *args, fault="sink.after_prepare@1:worker", state_dir=tmp_path).check_ok()
    assert "DONE" in run.output
    assert id_counts(pg_dsn, schema, "events") == Counter(range(TOTAL))
    assert max(m[3] for m in markers(pg_dsn, schema)) >= 1  # a retried attempt committed
    assert prepared_in_schema(pg_dsn, schema) == []


@pytest.fixture
def private_server():
    server = PrivateServer(run_dir() / f"test-pg-{uuid.uuid4().hex[:8]}")
    server.start()
    yield server
    server.stop()
    shutil.rmtree(server.data_dir, ignore_errors=True)


def test_postgres_restart_while_prepared_transactions_are_pending(private_server, tmp_path):
    """The driver dies after the tasks prepared; PostgreSQL restarts; the query resumes.

    A private server (started like the local service) is restarted, not the shared one.
    """
    dsn = private_server.dsn
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA s")
    _table(dsn, "s")
    checkpoint = tmp_path / "checkpoint"
    args = [dsn, "s.events", str(checkpoint), "two-phase", str(TOTAL), str(STEP)]
    run = run_script(SCRIPT, *args, fault="sink.after_prepare@2", state_dir=tmp_path)
    assert run.killed, run.output[-3000:]
    pending = prepared_in_schema(dsn, "s")
    assert len(pending) == 2
    private_server.restart()
    assert prepared_in_schema(dsn, "s") == pending  # prepared transactions are durable
    assert id_counts(dsn, "s", "events") == Counter()
    run_script(SCRIPT, *args, state_dir=tmp_path).check_ok()
    assert id_counts(dsn, "s", "events") == Counter(range(TOTAL))
    assert prepared_in_schema(dsn, "s") == []
