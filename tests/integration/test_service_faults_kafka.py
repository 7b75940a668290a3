"""Kafka brokers failing under live exactly-once queries (issue: services fail too).

A broker of the test's own (never the shared one) is SIGKILLed mid-stream and started again,
under ``jetkafka → window_aggregate → jetjdbc`` (two-phase) and ``jetkafka → jetkafka``
(transactional): the query rides through on librdkafka's retries, or fails saying what
happened and a restart on the same checkpoint completes. In a three-node KRaft cluster
(replication factor 3, ``min.insync.replicas=2``) the node that leads every partition and
coordinates the transactions and groups is killed: the query goes on without a restart. Each
test ends with the checks of the kill tests: every input record once in the output, no open
Kafka transaction and no prepared PostgreSQL transaction left, and a bound on the wait.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
import uuid
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from jetspark.devtools.services.registry import run_dir
from tests.faults_harness import Run, Started, run_script, start_script
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
BROKER_ERROR = re.compile(r"(?i)kafka|broker|transport|connect|timed out|transaction")


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


def _wait_for_commit(checkpoint: Path, started: Started, batch: int, timeout_s: float = 300) -> None:
    """Until Spark has committed micro-batch ``batch`` (the query is mid-stream)."""
    deadline = time.monotonic() + timeout_s
    while not (checkpoint / "commits" / str(batch)).exists():
        assert started.proc.poll() is None, f"the query ended early:\n{started.log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"batch {batch} not committed within {timeout_s} s"
        time.sleep(0.2)


@contextlib.contextmanager
def _ended_on_failure(started: Started):
    """The query script's whole session killed when the test fails before waiting for it."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(started.proc.pid, signal.SIGKILL)
        started.proc.wait()
        raise


def _finish(started: Started, args: tuple[str, ...], tmp_path: Path) -> tuple[Run, Run | None]:
    """The faulted run's end (within the bound) and, when it failed, a restart's (which must
    complete). A failure must say that Kafka was the trouble."""
    run = started.wait(HANG_BOUND_S)
    if run.returncode == 0:
        assert "DONE" in run.output
        return run, None
    assert BROKER_ERROR.search(run.output), f"the failure does not say what happened:\n{run.output[-5000:]}"
    return run, run_script(SCRIPT, *args, state_dir=tmp_path, timeout_s=HANG_BOUND_S).check_ok()


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


def test_broker_killed_under_window_query_into_postgres(broker, pg_dsn, pg_schema, tmp_path):
    """jetkafka → window_aggregate → jetjdbc (two-phase): the broker SIGKILLed after batch 1
    and started again; every record is counted once in the windows."""
    records = _records()
    topic = create_topic(broker.bootstrap, f"in_{uuid.uuid4().hex[:8]}", PARTITIONS)
    produce(broker.bootstrap, topic, records)
    checkpoint = tmp_path / "checkpoint"
    args = ("window-jdbc", broker.bootstrap, topic, str(checkpoint), str(PER_BATCH), "local[2]", pg_dsn,
            f"{pg_schema}.windows")
    started = start_script(SCRIPT, *args, state_dir=tmp_path)
    with _ended_on_failure(started):
        _wait_for_commit(checkpoint, started, 0)
        broker.kill()
        broker.start()
    _finish(started, args, tmp_path)
    got = _window_rows(pg_dsn, pg_schema)
    assert got == _expected_windows(records)
    assert sum(n * c for (_, _, n), c in got.items()) == PARTITIONS * PER_PARTITION
    assert prepared_in_schema(pg_dsn, pg_schema) == []


def _check_kafka_output(bootstrap: str, out_topic: str, records: list[tuple]) -> None:
    """Every input record once (read_committed), no transaction left open."""
    got = Counter((k, v) for k, v, *_ in read_topic(bootstrap, out_topic))
    assert got == Counter((k, v) for _, k, v, _ in records)
    assert open_transaction_partitions(bootstrap, [out_topic]) == {}
    assert ongoing_transactions(bootstrap, "jetspark.") == []


@pytest.mark.soak  # the suite's time budget: make soak runs it (tests/soak, repeated)
def test_broker_killed_under_kafka_to_kafka_query(broker, tmp_path):
    """jetkafka → jetkafka (transactional, commit=task): the broker — the transaction
    coordinator too — SIGKILLed after batch 1 and started again."""
    records = _records()
    suffix = uuid.uuid4().hex[:8]
    topic = create_topic(broker.bootstrap, f"in_{suffix}", PARTITIONS)
    out_topic = create_topic(broker.bootstrap, f"out_{suffix}", PARTITIONS)
    produce(broker.bootstrap, topic, records)
    checkpoint = tmp_path / "checkpoint"
    args = ("kafka", broker.bootstrap, topic, str(checkpoint), str(PER_BATCH), "local[2]", out_topic)
    started = start_script(SCRIPT, *args, state_dir=tmp_path)
    with _ended_on_failure(started):
        _wait_for_commit(checkpoint, started, 0)
        broker.kill()
        broker.start()
    _finish(started, args, tmp_path)
    _check_kafka_output(broker.bootstrap, out_topic, records)


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
    after batch 0; the query goes on to its end without a restart."""
    victim = _coordinating_node(cluster)
    suffix = uuid.uuid4().hex[:8]
    topic, out_topic = f"in_{suffix}", f"out_{suffix}"
    for name in (topic, out_topic):
        cluster.create_topic(name, PARTITIONS, leader=victim)
    records = _records()
    produce(cluster.bootstrap, topic, records)
    checkpoint = tmp_path / "checkpoint"
    args = ("kafka", cluster.bootstrap, topic, str(checkpoint), str(PER_BATCH), "local[2]", out_topic)
    started = start_script(SCRIPT, *args, state_dir=tmp_path)
    with _ended_on_failure(started):
        _wait_for_commit(checkpoint, started, 0)
        cluster.kill(victim)
    run = started.wait(HANG_BOUND_S)
    assert run.returncode == 0 and "DONE" in run.output, \
        f"the query did not ride through:\n{run.output[-5000:]}"
    assert victim not in set(cluster.leaders(out_topic).values()) | set(cluster.leaders(topic).values())
    _check_kafka_output(cluster.bootstrap, out_topic, records)
