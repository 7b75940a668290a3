"""One query, one driver: two drivers started on one checkpoint lose and duplicate nothing.

For each exactly-once path (jetrabbitmq → jetjdbc, jetkafka → jetjdbc ``exactly-once``,
jetkafka → jetkafka ``exactly-once``), two drivers start on the same checkpoint (and
``walLocation``) either at the same time or one while the other is held mid-run at a fault
point; a last run on the checkpoint then finishes whatever a failed driver left. The output
holds every input exactly once, nothing stays unacked in the queue or prepared in
PostgreSQL, and no transaction stays open in the output topic. On the queue path the
second driver stops with the lease error before it consumes anything.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from tests.faults_harness import run_script, start_script
from tests.integration.scripts.rabbitmq_common import publish, queue_counts, wait_counts
from tests.integration.scripts.sink_kafka_read import read_topic
from tests.integration.scripts.sink_pg import prepared_in_schema

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).parent / "scripts" / "two_drivers_query.py"
N, PER_TRIGGER = 400, 100
LEASE_ERROR = "another run holds walLocation"
PATHS = [("rabbitmq", "jdbc"), ("kafka", "jdbc"), ("kafka", "kafka")]
# Where the first driver is held while the second one starts: mid-run, with a batch
# committed and the next one written to the WAL (queue) or prepared in the sink (Kafka).
HOLD_AT = {"rabbitmq": "rabbitmq.after_wal_write@2:hold", "kafka": "sink.after_prepare@2:hold"}


@pytest.fixture
def pipeline(request, tmp_path, amqp_url, rabbit_queue, kafka_bootstrap, kafka_topic, pg_dsn, pg_schema):
    """(config for the query script, check of the output) for one source/sink pair."""
    source, sink = request.param
    ids = [f"id{i:04d}" for i in range(N)]
    c: dict = {"source": source, "sink": sink, "checkpoint": str(tmp_path / "checkpoint"),
               "perTrigger": PER_TRIGGER, "sinkId": f"two-{uuid.uuid4().hex[:8]}"}
    if source == "rabbitmq":
        c.update(amqpUrl=amqp_url, queue=rabbit_queue, walLocation=str(tmp_path / "wal"))
        publish(amqp_url, rabbit_queue, ids)
    else:
        c.update(bootstrap=kafka_bootstrap, topic=kafka_topic(partitions=2))
        _produce(kafka_bootstrap, c["topic"], ids)
    if sink == "jdbc":
        c.update(pgDsn=pg_dsn, table=f'"{pg_schema}".out')
    else:
        c.update(bootstrap=kafka_bootstrap, outTopic=kafka_topic(partitions=2))

    def check() -> None:
        if sink == "jdbc":
            assert _pg_ids(pg_dsn, pg_schema) == Counter(ids)
            assert prepared_in_schema(pg_dsn, pg_schema) == []
        else:  # read_committed reaches the end only when no transaction is left open
            out = read_topic(kafka_bootstrap, c["outTopic"])
            assert Counter(v.decode() for _k, v, *_ in out) == Counter(ids)
        if source == "rabbitmq":
            assert wait_counts(rabbit_queue, (0, 0)) == (0, 0)

    return c, check


def _produce(bootstrap: str, topic: str, ids: list[str]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i, key in enumerate(ids):
        producer.produce(topic, key=key, value=key, partition=i % 2)
    assert producer.flush(30) == 0


def _pg_ids(dsn: str, schema: str) -> Counter:
    import psycopg

    with psycopg.connect(dsn) as conn:
        return Counter(r[0] for r in conn.execute(f'SELECT id FROM "{schema}".out').fetchall())


def _finish(c: dict, tmp_path: Path) -> None:
    """A last driver alone on the checkpoint completes what the others left."""
    run_script(SCRIPT, json.dumps(c), state_dir=tmp_path).check_ok()


def _wait_for(path: Path, proc, timeout_s: float = 240) -> None:
    """Until the held driver says it is held (it writes ``path``); fail if it ended first."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if proc.proc.poll() is not None:
            log = proc.log.read_text()[-4000:]
            raise AssertionError(f"the first driver ended before the hold point:\n{log}")
        assert time.monotonic() < deadline, "the first driver did not reach the hold point"
        time.sleep(0.1)


@pytest.mark.parametrize("pipeline", PATHS, indirect=True, ids=["-".join(p) for p in PATHS])
def test_second_driver_joining_a_running_one(pipeline, tmp_path, rabbit_queue):
    c, check = pipeline
    gate = tmp_path / "gate"
    first = start_script(SCRIPT, json.dumps(c), fault=HOLD_AT[c["source"]], state_dir=tmp_path,
                         env={"JETSPARK_FAULT_GATE": str(gate)})
    try:
        _wait_for(Path(f"{gate}.held"), first)
        if c["source"] == "rabbitmq":
            held = queue_counts(rabbit_queue)
        second = start_script(SCRIPT, json.dumps(c), state_dir=tmp_path).wait()
        if c["source"] == "rabbitmq":  # refused before consuming: the queue is as the first left it
            assert second.returncode == 1 and LEASE_ERROR in second.output, second.output[-4000:]
            assert queue_counts(rabbit_queue) == held
    finally:
        gate.touch()
    first_run = first.wait()
    if c["source"] == "rabbitmq":  # the lease holder was never disturbed
        first_run.check_ok()
    _finish(c, tmp_path)
    check()


@pytest.mark.parametrize("pipeline", PATHS, indirect=True, ids=["-".join(p) for p in PATHS])
def test_two_drivers_started_together(pipeline, tmp_path):
    c, check = pipeline
    a = start_script(SCRIPT, json.dumps(c), state_dir=tmp_path)
    b = start_script(SCRIPT, json.dumps(c), state_dir=tmp_path)
    runs = [a.wait(), b.wait()]
    for run in runs:  # each either finished or stopped with an error; never killed or hung
        assert run.returncode in (0, 1), run.output[-4000:]
    if c["source"] == "rabbitmq" and all(r.returncode == 1 for r in runs):
        assert any(LEASE_ERROR in r.output for r in runs)
    _finish(c, tmp_path)
    check()
