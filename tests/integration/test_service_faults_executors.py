"""Executor JVMs killed mid-batch on the local standalone cluster (issue: services fail too).

The queries run on ``jetspark services up spark`` (a master and two workers, one executor
each). A Python worker that reaches a fault point armed with ``:executor``
(``jetspark.faults``) SIGKILLs the executor JVM it runs under: while a ``jetkafka`` read task
is in flight (a chunk handed to Spark, the sink's transaction open), or in a ``jetjdbc``
two-phase sink task just after its PREPARE TRANSACTION. Spark learns from the cluster that
the executor is lost and retries its task on the other executor (or on the one the master
starts in its place; ``spark.task.maxFailures`` is 4 on a cluster); the query goes on to its
end without a restart. Each test ends with the checks of the kill tests: every input record
once in the output, no prepared PostgreSQL transaction and no open Kafka transaction left,
and a bound on the wait (the script's timeout).
"""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tests.faults_harness import Run, run_script
from tests.integration.scripts.jetkafka_common import produce
from tests.integration.scripts.sink_kafka_read import read_topic
from tests.integration.scripts.sink_pg import markers, prepared_in_schema
from tests.integration.test_service_faults_kafka import HANG_BOUND_S, PARTITIONS, PER_BATCH, _records
from tests.service_faults import create_topic, ongoing_transactions, open_transaction_partitions

pytestmark = pytest.mark.integration

SCRIPTS = Path(__file__).parent / "scripts"
TO_JDBC = SCRIPTS / "executor_fault_query.py"
"""jetkafka → jetjdbc (two-phase): one stage per micro-batch, its tasks read and write."""
TO_KAFKA = SCRIPTS / "service_fault_query.py"
"""Its ``kafka`` query: jetkafka → jetkafka (transactional, ``commit=task``), one stage too."""
MAX_OFFSETS = 2 * PER_BATCH
"""Per micro-batch: the 1503 records in two batches (few batches, a short test)."""
READING = f"jetkafka.read_chunk@{PARTITIONS + 1}:executor"
"""The chunk after micro-batch 0's (one per partition, as a rule): a read task of batch 1, with
batch 0 committed and the sink's transaction of batch 1 open."""
PREPARED = "sink.after_prepare@1:executor"
"""A sink task that has prepared its transaction and not yet reported it to the driver."""
LOST_EXECUTOR = re.compile(
    r"ExecutorLostFailure \(executor \d+ exited caused by one of the running tasks\) "
    r"Reason: (Command exited with code 137|Remote RPC client disassociated)"
)
"""The driver's log line for a task in flight on an executor that died of SIGKILL: the reason is
the Master's (the exit code) or the driver's own (the lost connection), whichever comes first."""
TIMEOUT_S = HANG_BOUND_S + 120
"""The test's: the cluster's start (once a run), one query script within its bound, the checks."""


def _input(bootstrap: str) -> tuple[str, list[tuple]]:
    records = _records()  # 3 partitions of 500 records, then a record per partition an hour later
    topic = create_topic(bootstrap, f"in_{uuid.uuid4().hex[:8]}", PARTITIONS)
    produce(bootstrap, topic, records)
    return topic, records


def _run(script: Path, args: tuple[str, ...], fault: str, tmp_path: Path) -> Run:
    """The query armed with ``fault`` to its end within the bound, without a restart; Spark
    says that an executor running a task was killed (the fault was reached on an executor)."""
    run = run_script(script, *args, fault=fault, state_dir=tmp_path, timeout_s=HANG_BOUND_S)
    assert run.returncode == 0 and "DONE" in run.output, (
        f"the query did not ride through:\n{run.output[-5000:]}"
    )
    assert LOST_EXECUTOR.search(run.output), f"no executor was killed:\n{run.output[-5000:]}"
    return run


def _jdbc_query(spark_master: str, bootstrap: str, dsn: str, schema: str, fault: str, tmp_path: Path) -> None:
    """jetkafka → jetjdbc (two-phase) with ``fault``, then the checks."""
    topic, records = _input(bootstrap)
    args = (
        bootstrap,
        topic,
        str(tmp_path / "checkpoint"),
        str(MAX_OFFSETS),
        spark_master,
        dsn,
        f"{schema}.events",
    )
    _run(TO_JDBC, args, fault, tmp_path)
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            sql.SQL("SELECT k, v FROM {}").format(sql.Identifier(schema, "events"))
        ).fetchall()
    assert Counter(rows) == Counter((k.decode(), v.decode()) for _, k, v, _ in records)
    assert prepared_in_schema(dsn, schema) == []
    # the killed task's partition was committed by a retried attempt, the first one's rolled back
    assert max(attempt for _, _, _, attempt, _ in markers(dsn, schema)) >= 1


@pytest.mark.soak  # the suite's time budget: make test loses an executor under the Kafka sink (below)
@pytest.mark.timeout(TIMEOUT_S)
def test_executor_lost_after_a_sink_task_prepared(spark_master, kafka_bootstrap, pg_dsn, pg_schema, tmp_path):
    """The executor of a jetjdbc task that prepared its transaction is killed: the retried
    attempt rolls that transaction back before it writes its own, so the first attempt's rows
    are neither left prepared nor committed beside the retry's."""
    _jdbc_query(spark_master, kafka_bootstrap, pg_dsn, pg_schema, PREPARED, tmp_path)


@pytest.mark.soak  # the suite's time budget: make test kills a read task under the Kafka sink (below)
@pytest.mark.timeout(TIMEOUT_S)
def test_executor_lost_while_reading_into_postgres(
    spark_master, kafka_bootstrap, pg_dsn, pg_schema, tmp_path
):
    """The executor of a task that reads Kafka and COPYs into its open (unprepared) PostgreSQL
    transaction is killed: the session dies with it, the retry writes the partition once."""
    _jdbc_query(spark_master, kafka_bootstrap, pg_dsn, pg_schema, READING, tmp_path)


@pytest.mark.timeout(TIMEOUT_S)
def test_executor_lost_while_reading_into_kafka(spark_master, kafka_bootstrap, tmp_path):
    """The executor of a task that reads Kafka and has written into its open Kafka transaction
    is killed: the retried attempt, under the same transactional id, fences the dead one's
    producer and aborts its transaction, then writes every record once."""
    topic, records = _input(kafka_bootstrap)
    out_topic = create_topic(kafka_bootstrap, f"out_{uuid.uuid4().hex[:8]}", PARTITIONS)
    args = (
        "kafka",
        kafka_bootstrap,
        topic,
        str(tmp_path / "checkpoint"),
        str(MAX_OFFSETS),
        spark_master,
        out_topic,
    )
    _run(TO_KAFKA, args, READING, tmp_path)
    got = Counter((k, v) for k, v, *_ in read_topic(kafka_bootstrap, out_topic))
    assert got == Counter((k, v) for _, k, v, _ in records)
    assert open_transaction_partitions(kafka_bootstrap, [out_topic]) == {}
    # the query's own transactional ids: other tests may have transactions open on the shared broker
    query_id = json.loads((tmp_path / "checkpoint" / "metadata").read_text())["id"]
    assert ongoing_transactions(kafka_bootstrap, f"jetspark.{query_id}.") == []
