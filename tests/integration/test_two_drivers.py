"""One query, one driver: two drivers started on one checkpoint lose and duplicate nothing.

For each exactly-once path (jetrabbitmq → jetjdbc, jetkafka → jetjdbc ``exactly-once``,
jetkafka → jetkafka ``exactly-once``), two drivers start on the same checkpoint (and
``walLocation``) either at the same time or one while the other is held mid-run at a fault
point; a last run on the checkpoint then finishes whatever a failed driver left. The output
holds every input exactly once, nothing stays unacked in the queue or prepared in
PostgreSQL, and no transaction stays open in the output topic. The tests show that the
drivers overlapped (a driver held at its gate cannot end, so one that ended meanwhile ran
beside it), and on the queue path which one was refused: the one without the lease stops
with the lease error before it consumes anything, while the holder finishes undisturbed.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from tests.faults_harness import run_script, start_script, wait_held
from tests.integration.scripts.rabbitmq_common import publish, queue_counts, wait_counts
from tests.integration.scripts.sink_kafka_read import read_topic
from tests.integration.scripts.sink_pg import prepared_in_schema

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).parent / "scripts" / "two_drivers_query.py"
N, PER_TRIGGER = 400, 100
LEASE_ERROR = "another run holds walLocation"
# Two drivers started at the same instant on a new checkpoint may meet before the lease does:
# Spark itself refuses the one that loses the race to write the checkpoint's metadata file.
SPARK_METADATA_REFUSAL = "Multiple streaming queries are concurrently using metadata"
PATHS = [("rabbitmq", "jdbc"), ("kafka", "jdbc"), ("kafka", "kafka")]
# make test runs the queue path (the lease) started together and jetkafka -> jetjdbc joining a
# running driver; the other cases are soak cases (a slice a run), and make soak runs every path
# both ways (and repeats them).
JOINING = [pytest.param(p, id="-".join(p), marks=() if p == ("kafka", "jdbc") else pytest.mark.soak)
           for p in PATHS]
TOGETHER = [pytest.param(p, id="-".join(p), marks=() if p[0] == "rabbitmq" else pytest.mark.soak)
            for p in PATHS]
# Where the first driver is held while the second one starts: mid-run, with a batch
# committed and the next one written to the WAL (queue) or prepared in the sink (Kafka).
HOLD_AT = {"rabbitmq": "rabbitmq.after_wal_write@2:hold", "kafka": "sink.after_prepare@2:hold"}
# How a held jetkafka driver is refused once the second finished the query: Spark's commit log
# already holds its batch (jetjdbc), or the second's transactional producer fenced its own.
FIRST_REFUSED_BY = {"jdbc": "CONCURRENT_STREAM_LOG_UPDATE", "kafka": "fenced by a newer instance"}
# Two jetkafka drivers started together (no lease): one refused lost the race for the checkpoint's
# metadata, met the other's batch in Spark's offset or commit log, had its prepared transaction
# rolled back by the other's recovery (jetjdbc), or had its transactional producer fenced by the
# other's (jetkafka).
KAFKA_REFUSALS = {
    "jdbc": (SPARK_METADATA_REFUSAL, "CONCURRENT_STREAM_LOG_UPDATE",
             "it was rolled back (by a concurrent attempt of the same partition"),
    "kafka": (SPARK_METADATA_REFUSAL, "CONCURRENT_STREAM_LOG_UPDATE", "fenced by a newer instance"),
}


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


@pytest.mark.parametrize("pipeline", JOINING, indirect=True)
def test_second_driver_joining_a_running_one(pipeline, tmp_path, rabbit_queue):
    c, check = pipeline
    gate = tmp_path / "gate"
    first = start_script(SCRIPT, json.dumps(c), fault=HOLD_AT[c["source"]], state_dir=tmp_path,
                         env={"JETSPARK_FAULT_GATE": str(gate)})
    with first.killed_on_failure():  # a failed check never leaves the held driver running
        try:
            wait_held(gate, first)
            if c["source"] == "rabbitmq":
                held = queue_counts(rabbit_queue)
            second = start_script(SCRIPT, json.dumps(c), state_dir=tmp_path).wait()
            # the drivers overlapped: the first was held mid-run for the whole of the second's run
            assert first.proc.poll() is None, "the first driver ended while it should have been held"
            if c["source"] == "rabbitmq":  # refused before consuming: the queue is as the first left it
                assert second.returncode == 1 and LEASE_ERROR in second.output, second.output[-4000:]
                assert "DONE" not in second.output
                assert queue_counts(rabbit_queue) == held
            else:  # no lease on Kafka: the second runs the query to its end on the shared checkpoint
                assert second.returncode == 0 and "DONE" in second.output, second.output[-4000:]
        finally:
            gate.touch()
        first_run = first.wait()
    if c["source"] == "rabbitmq":  # the lease holder was never disturbed
        first_run.check_ok()
        assert "DONE" in first_run.output
    else:  # the held first is the one refused when it resumes: its batch is the second's by now
        assert first_run.returncode == 1 and "DONE" not in first_run.output, first_run.output[-4000:]
        assert FIRST_REFUSED_BY[c["sink"]] in first_run.output, first_run.output[-4000:]
    _finish(c, tmp_path)
    check()


@pytest.mark.parametrize("pipeline", TOGETHER, indirect=True)
def test_two_drivers_started_together(pipeline, tmp_path):
    """Both start at once, each armed to hold mid-run behind a gate of its own, so neither can
    finish before the test opens the gates: whichever ends first (refused) ended while the other
    still ran, and two held at once ran at once."""
    c, check = pipeline
    gates = [tmp_path / "gate-a", tmp_path / "gate-b"]
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    drivers = [start_script(SCRIPT, json.dumps(c), fault=HOLD_AT[c["source"]], state_dir=tmp_path / d,
                            env={"JETSPARK_FAULT_GATE": str(g)}) for d, g in zip("ab", gates, strict=True)]
    with contextlib.ExitStack() as stack:  # a failed check never leaves a held driver running
        for driver in drivers:
            stack.enter_context(driver.killed_on_failure())
        try:
            held, ended = _until_overlap(drivers, gates)
            assert len(held) + len(ended) == 2 and held, "no driver reached its hold point"
            if c["source"] == "rabbitmq":  # one holds the lease; the other was refused meanwhile
                (refused,) = ended
                run = drivers[refused].wait()
                assert run.returncode == 1, run.output[-4000:]
                assert LEASE_ERROR in run.output or SPARK_METADATA_REFUSAL in run.output, run.output[-4000:]
                assert "DONE" not in run.output
                assert drivers[held[0]].proc.poll() is None  # still held: the two overlapped
        finally:
            for g in gates:
                g.touch()
        runs = [d.wait() for d in drivers]
    for run in runs:  # each either finished or stopped with an error; never killed or hung
        assert run.returncode in (0, 1), run.output[-4000:]
    if c["source"] == "rabbitmq":
        (holder,) = held
        runs[holder].check_ok()
        assert "DONE" in runs[holder].output
    else:  # each ran the query to its end, or was refused for the other's work, by name
        for run in runs:
            if run.returncode == 0:
                assert "DONE" in run.output, run.output[-4000:]
            else:
                assert "DONE" not in run.output, run.output[-4000:]
                assert any(r in run.output for r in KAFKA_REFUSALS[c["sink"]]), run.output[-4000:]
    _finish(c, tmp_path)
    check()


def _until_overlap(drivers: list, gates: list[Path], timeout_s: float = 240) -> tuple[list[int], list[int]]:
    """Until every driver is either held at its gate or ended: (held ones, ended ones). A held
    driver cannot end before its gate opens, so an ended one ended while the held ones ran."""
    deadline = time.monotonic() + timeout_s
    while True:
        held = [i for i, g in enumerate(gates) if Path(f"{g}.held").exists()]
        ended = [i for i, d in enumerate(drivers) if i not in held and d.proc.poll() is not None]
        if len(held) + len(ended) == len(drivers):
            return held, ended
        assert time.monotonic() < deadline, "the drivers neither reached their hold points nor ended"
        time.sleep(0.1)
