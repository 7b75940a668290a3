"""PostgreSQL shut down the hard way (``pg_ctl stop -m immediate``) and started again under a
live ``jetjdbc`` query (issue: services fail too).

A server of the test's own (never the shared one) is crashed while a task COPYs, between the
tasks' PREPARE and the driver's COMMIT PREPARED, while the driver commits, and while a task
recovers a previous run's prepared transactions — for ``commit=two-phase``, ``task`` and
``upsert``. The query is held at the fault point (``jetspark.faults``, ``:hold``) while the
server goes down and comes back, then let go. Spark runs ``local[1,4]``, retrying a failed task
as a cluster does (``spark.task.maxFailures=4``): a task whose connection died is retried, the
prepared transactions outlive the crash, the driver commits them on a new connection, and the
query rides through (were it to fail, the error must say what happened and a restart on the
same checkpoint must complete). Every row ends up once in the table, no prepared transaction
stays behind, and no run waits longer than its bound.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from jetspark.devtools.services.registry import run_dir
from jetspark.faults import ENV_GATE
from tests.faults_harness import Run, Started, run_script, start_script
from tests.integration.scripts.sink_pg import id_counts, prepared_in_schema
from tests.service_faults import PrivatePostgres

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).parent / "scripts" / "sink_jdbc_query.py"
TOTAL, STEP = 2000, 1000  # two micro-batches of two partitions each
MASTER = "local[1,4]"
"""One task at a time, each retried up to 4 times as on a cluster (``spark.task.maxFailures``):
while the held task waits for the gate no other task runs into the server going down, so every
task that loses its session is retried against a server that is up again."""
HANG_BOUND_S = 300
"""How long a run may take in all (a Spark start on a loaded machine included): a dead
connection fails at once, and a lock wait ends after the sink's 60 s lock_timeout."""
SERVER_ERROR = re.compile(r"(?i)server closed the connection|terminating connection"
                          r"|connection .*(lost|failed)|cannot connect to PostgreSQL|consuming input failed")


@dataclass(frozen=True)
class Fault:
    commit: str
    hold: str
    """Where the query is held while the server crashes and restarts."""
    before: str | None = None
    """A fault point the driver is first killed at (a previous run that leaves work behind)."""


FAULTS = {
    "two-phase-during-copy": Fault("two-phase", "sink.during_write@1:hold"),
    "two-phase-prepared": Fault("two-phase", "sink.after_prepare@2:hold"),
    "two-phase-during-commit": Fault("two-phase", "sink.during_commit@1:hold"),
    "two-phase-recovery": Fault("two-phase", "sink.during_recovery@1:hold", before="sink.after_prepare@2"),
    "task-during-copy": Fault("task", "sink.during_write@1:hold"),
    "task-before-commit": Fault("task", "sink.after_prepare@1:hold"),
    "task-recovery": Fault("task", "sink.during_recovery@1:hold", before="sink.after_commit@1"),
    "upsert-during-copy": Fault("upsert", "sink.during_write@1:hold"),
}
LIGHT = ["two-phase-prepared"]
"""The faults ``make test`` runs (within the suite's time budget); ``make soak`` runs every one
of :data:`FAULTS`, repeated (tests/soak/test_service_faults_soak.py)."""


@pytest.fixture(scope="module")
def server():
    pg = PrivatePostgres(run_dir() / f"test-pg-faults-{uuid.uuid4().hex[:8]}")
    pg.start()
    yield pg
    pg.stop()


def _schema(dsn: str, commit: str) -> str:
    name = f"s_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE TABLE {} (id bigint {}, name text, amount double precision)").format(
            sql.Identifier(name, "events"), sql.SQL("PRIMARY KEY" if commit == "upsert" else "")))
    return name


def _wait_held(gate: Path, started: Started, timeout_s: float = HANG_BOUND_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not Path(f"{gate}.held").exists():
        assert started.proc.poll() is None, f"the query ended before the hold point:\n" \
                                            f"{started.log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"the hold point was not reached within {timeout_s} s"
        time.sleep(0.1)


def run_with_crash(server: PrivatePostgres, tmp_path: Path, fault: Fault) -> tuple[str, Run, Run | None]:
    """The query held at ``fault.hold``, PostgreSQL crashed and started again, the query let go;
    when it fails, a restart. The schema, the faulted run and the restart's run (or None)."""
    schema = _schema(server.dsn, fault.commit)
    args = (server.dsn, f"{schema}.events", str(tmp_path / "checkpoint"), fault.commit, str(TOTAL), str(STEP),
            MASTER)
    if fault.before:
        killed = run_script(SCRIPT, *args, fault=fault.before, state_dir=tmp_path, timeout_s=HANG_BOUND_S)
        assert killed.killed, f"{fault.before} was not reached:\n{killed.output[-3000:]}"
    gate = tmp_path / f"gate-{uuid.uuid4().hex[:6]}"
    started = start_script(SCRIPT, *args, fault=fault.hold, state_dir=tmp_path, env={ENV_GATE: str(gate)})
    try:
        _wait_held(gate, started)
        server.crash_and_restart()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(started.proc.pid, signal.SIGKILL)
        started.proc.wait()
        raise
    finally:
        gate.touch()
    run = started.wait(HANG_BOUND_S)
    if run.returncode == 0:
        assert "DONE" in run.output
        return schema, run, None
    assert SERVER_ERROR.search(run.output), f"the failure does not say what happened:\n{run.output[-5000:]}"
    return schema, run, run_script(SCRIPT, *args, state_dir=tmp_path, timeout_s=HANG_BOUND_S).check_ok()


def check_exactly_once(dsn: str, schema: str) -> None:
    assert id_counts(dsn, schema, "events") == Counter(range(TOTAL))
    assert prepared_in_schema(dsn, schema) == []


@pytest.mark.parametrize("name", LIGHT)
def test_postgres_crash_under_a_live_query(server, tmp_path, name):
    fault = FAULTS[name]
    schema, _run, restarted = run_with_crash(server, tmp_path, fault)
    check_exactly_once(server.dsn, schema)
    # A task whose session died is retried; prepared transactions outlive the crash; the driver
    # commits them on a new session: no run needs a restart.
    assert restarted is None, "the query failed instead of riding through"
