"""Kafka brokers failing under live exactly-once queries (issue: services fail too).

A broker of the test's own (never the shared one) is SIGKILLed while the query is held at a
point (``jetspark.faults``, ``:hold``; :data:`KILLS`) — the driver planning the first
micro-batch (its admin client knows the partitions' leader epochs from before the kill), a
read task of the first batch mid-read, the sink's task of the first batch inside its
transaction, the driver planning the second batch — then the query is let go against the
dead broker, and the broker started again. Under ``jetkafka → window_aggregate →
jetjdbc`` (two-phase) and ``jetkafka → jetkafka`` (transactional) the query rides through —
the calls to Kafka retry what a restarting broker answers (``kafka.default.api.timeout.ms``),
Spark retries a task whose transaction the broker lost (``local[2,4]``, as a cluster) — and
the held batch commits after the restart. In a three-node KRaft cluster (replication factor
3, ``min.insync.replicas=2``) the node that leads every partition and coordinates the
transactions and groups is killed: the query goes on without a restart. Each test ends with
the checks of the kill tests: every input record once in the output, no open Kafka
transaction and no prepared PostgreSQL transaction left, and a bound on the wait.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from jetspark.devtools.services.registry import run_dir
from jetspark.faults import ENV_GATE
from tests.faults_harness import Run, start_script, wait_held
from tests.integration.scripts.jetkafka_common import BASE_TS, produce
from tests.integration.scripts.sink_kafka_read import read_topic
from tests.integration.scripts.sink_pg import prepared_in_schema
from tests.service_faults import (
    KafkaCluster,
    PrivateKafka,
    create_topic,
    ongoing_transactions,
    open_transaction_partitions,
)

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).parent / "scripts" / "service_fault_query.py"
PARTITIONS, PER_PARTITION, PER_BATCH = 3, 500, 500
KEYS, STEP_MS, WINDOW_MS = 7, 50, 10_000
HANG_BOUND_S = 300
"""How long a query may take in all once its broker is killed: librdkafka's retries (the
transaction and message timeouts, 60 s) and jetkafka's read patience
(``kafkaConsumer.pollTimeoutMs``, 120 s) end well before; the test fails past it."""
MASTER = "local[2,4]"
"""Two task slots, a failed task retried up to 4 times as on a cluster (``spark.task.maxFailures``)."""
MET_THE_KILL = re.compile(r"Connect to ipv4#127\.0\.0\.1:(?P<port>\d+) failed: Connection refused")
"""librdkafka's log line (Spark's log) of a client that met the dead broker: the docs quote it."""


@dataclass(frozen=True)
class Kill:
    hold: str
    """The fault point the query is held at while the broker is killed and started again."""
    batch: int
    """The micro-batch the hold is in: it must commit after the restart."""
    queries: tuple[str, ...] = ("window-jdbc", "kafka")


KILLS = {
    # the driver's offset listing of the first batch, by an admin client that knew the old epochs
    "planning-batch-0": Kill("jetkafka.latest_offset@1:hold", 0),
    "reading-batch-0": Kill("jetkafka.read_chunk@1:hold", 0),
    # inside the sink task's transaction (the broker is its coordinator too)
    "writing-batch-0": Kill("sink.during_write@1:hold", 0, ("kafka",)),
    "planning-batch-1": Kill("jetkafka.latest_offset@2:hold", 1),
}
LIGHT = [("kafka", "planning-batch-0")]
"""The kills ``make test`` runs (the suite's time budget); ``make soak`` runs every one of
:data:`KILLS` under each query, repeated (tests/soak/test_service_faults_soak.py)."""


def _records() -> list[tuple]:
    """``PER_PARTITION`` records per partition, keys ``k0…k6``, 50 ms apart in event time; then
    one record per partition an hour later whose watermark closes every window before it."""
    out = [(p, f"k{(p * PER_PARTITION + i) % KEYS}".encode(), f"{p}-{i}".encode(), BASE_TS + i * STEP_MS)
           for p in range(PARTITIONS) for i in range(PER_PARTITION)]
    return out + [(p, b"closer", b"closer", BASE_TS + 3_600_000) for p in range(PARTITIONS)]


def _expected_windows(records: list[tuple]) -> Counter:
    """(key, window start in epoch ms, count) of every window the records fill, the closers' aside."""
    cells = Counter((k.decode(), ts - ts % WINDOW_MS) for _, k, _, ts in records if k != b"closer")
    return Counter((k, start, n) for (k, start), n in cells.items())


def _held_fault(kill: Kill, args: tuple[str, ...], tmp_path: Path, fault: Callable[[], None],
                recover: Callable[[], None] = lambda: None) -> Run:
    """Run the query held at ``kill.hold``, do ``fault`` (e.g. kill the broker), let the query
    go on against it, then ``recover`` (start the broker again): the query must ride through,
    and the held batch commit after the recovery."""
    gate = tmp_path / f"gate-{uuid.uuid4().hex[:6]}"
    committed = Path(args[3]) / "commits" / str(kill.batch)
    started = start_script(SCRIPT, *args, fault=kill.hold, state_dir=tmp_path, env={ENV_GATE: str(gate)})
    try:
        wait_held(gate, started, HANG_BOUND_S)
        assert not committed.exists(), f"batch {kill.batch} committed before the hold"
        fault()
        gate.touch()
        recover()
        done = time.time()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(started.proc.pid, signal.SIGKILL)
        started.proc.wait()
        raise
    finally:
        gate.touch()
    run = started.wait(HANG_BOUND_S)
    assert run.returncode == 0 and "DONE" in run.output, \
        f"the query did not ride through:\n{run.output[-5000:]}"
    assert committed.stat().st_mtime >= done, f"batch {kill.batch} committed before the recovery"
    return run


def _kill_while_held(broker: PrivateKafka, kill: Kill, args: tuple[str, ...], tmp_path: Path) -> Run:
    """The broker SIGKILLed while the query is held at ``kill.hold``, the query let go against
    the dead broker, the broker started again; a client met the dead broker (librdkafka's log
    line the Faults page quotes)."""
    run = _held_fault(kill, args, tmp_path, broker.kill, broker.start)
    met = {m["port"] for m in MET_THE_KILL.finditer(run.output)}
    assert broker.bootstrap.rsplit(":", 1)[1] in met, \
        f"no client met the dead broker (librdkafka's 'Connection refused'):\n{run.output[-5000:]}"
    return run


@pytest.fixture(scope="module")
def broker():
    node = PrivateKafka(run_dir() / f"test-kafka-faults-{uuid.uuid4().hex[:8]}")
    node.start()
    yield node
    node.stop()


def _window_rows(dsn: str, schema: str) -> Counter:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(sql.SQL("SELECT k, window_start, n FROM {}").format(
            sql.Identifier(schema, "windows"))).fetchall()
    return Counter((k, int(start.timestamp() * 1000), n) for k, start, n in rows)


def broker_killed_under_window_query(broker: PrivateKafka, pg_dsn: str, pg_schema: str, tmp_path: Path,
                                     kill: Kill) -> None:
    """jetkafka → window_aggregate → jetjdbc (two-phase), the broker killed at ``kill``: every
    record is counted once in the windows."""
    records = _records()
    topic = create_topic(broker.bootstrap, f"in_{uuid.uuid4().hex[:8]}", PARTITIONS)
    produce(broker.bootstrap, topic, records)
    args = ("window-jdbc", broker.bootstrap, topic, str(tmp_path / "checkpoint"), str(PER_BATCH), MASTER,
            pg_dsn, f"{pg_schema}.windows")
    _kill_while_held(broker, kill, args, tmp_path)
    got = _window_rows(pg_dsn, pg_schema)
    assert got == _expected_windows(records)
    assert sum(n * c for (_, _, n), c in got.items()) == PARTITIONS * PER_PARTITION
    assert prepared_in_schema(pg_dsn, pg_schema) == []


def broker_killed_under_kafka_to_kafka_query(broker: PrivateKafka, tmp_path: Path, kill: Kill) -> None:
    """jetkafka → jetkafka (transactional, commit=task), the broker — the transaction
    coordinator too — killed at ``kill``: every record once in the output topic."""
    records = _records()
    suffix = uuid.uuid4().hex[:8]
    topic = create_topic(broker.bootstrap, f"in_{suffix}", PARTITIONS)
    out_topic = create_topic(broker.bootstrap, f"out_{suffix}", PARTITIONS)
    produce(broker.bootstrap, topic, records)
    args = ("kafka", broker.bootstrap, topic, str(tmp_path / "checkpoint"), str(PER_BATCH), MASTER, out_topic)
    _kill_while_held(broker, kill, args, tmp_path)
    _check_kafka_output(broker.bootstrap, out_topic, records)


def run_kill(query: str, name: str, broker: PrivateKafka, tmp_path: Path, pg_dsn: str | None = None,
             pg_schema: str | None = None) -> None:
    """The broker killed at ``KILLS[name]`` under ``query`` (``window-jdbc`` or ``kafka``)."""
    kill = KILLS[name]
    assert query in kill.queries
    if query == "kafka":
        broker_killed_under_kafka_to_kafka_query(broker, tmp_path, kill)
    else:
        assert pg_dsn is not None and pg_schema is not None
        broker_killed_under_window_query(broker, pg_dsn, pg_schema, tmp_path, kill)


@pytest.mark.parametrize(("query", "name"), LIGHT)
def test_broker_killed_under_a_live_query(broker, pg_dsn, pg_schema, tmp_path, query, name):
    run_kill(query, name, broker, tmp_path, pg_dsn, pg_schema)


def _check_kafka_output(bootstrap: str, out_topic: str, records: list[tuple]) -> None:
    """Every input record once (read_committed), no transaction left open."""
    got = Counter((k, v) for k, v, *_ in read_topic(bootstrap, out_topic))
    assert got == Counter((k, v) for _, k, v, _ in records)
    assert open_transaction_partitions(bootstrap, [out_topic]) == {}
    assert ongoing_transactions(bootstrap, "jetspark.") == []


@pytest.fixture
def cluster():
    nodes = KafkaCluster(run_dir() / f"test-kafka-cluster-{uuid.uuid4().hex[:8]}")
    try:
        nodes.start()
        yield nodes
    finally:
        nodes.stop()


def _coordinating_node(cluster: KafkaCluster) -> int:
    """The node that coordinates every transaction: the leader of ``__transaction_state``'s one
    partition, made by a first transactional producer (and the groups' ``__consumer_offsets``)."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "fault-test-warmup"})
    producer.init_transactions(60)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "fault-test-warmup"})
    deadline = time.monotonic() + 60
    while True:  # the group coordinator answers once its new partition is loaded
        try:
            consumer.committed([TopicPartition("__transaction_state", 0)], timeout=10)
            break
        except KafkaException:
            assert time.monotonic() < deadline, "the cluster's group coordinator did not answer in 60 s"
            time.sleep(0.5)
    consumer.close()
    return cluster.leaders("__transaction_state")[0]


@pytest.mark.soak  # the suite's time budget: make soak runs it (tests/soak, repeated)
def test_node_killed_in_a_three_node_cluster(cluster, tmp_path):
    """jetkafka → jetkafka on three nodes (replication factor 3, min.insync.replicas=2): the node
    that leads every partition of both topics and coordinates the transactions is SIGKILLed
    while the driver plans batch 1; the query goes on to its end without a restart."""
    victim = _coordinating_node(cluster)
    suffix = uuid.uuid4().hex[:8]
    topic, out_topic = f"in_{suffix}", f"out_{suffix}"
    for name in (topic, out_topic):
        cluster.create_topic(name, PARTITIONS, leader=victim)
    records = _records()
    produce(cluster.bootstrap, topic, records)
    checkpoint = str(tmp_path / "checkpoint")
    args = ("kafka", cluster.bootstrap, topic, checkpoint, str(PER_BATCH), MASTER, out_topic)
    _held_fault(KILLS["planning-batch-1"], args, tmp_path, lambda: cluster.kill(victim))
    assert victim not in set(cluster.leaders(out_topic).values()) | set(cluster.leaders(topic).values())
    _check_kafka_output(cluster.bootstrap, out_topic, records)
