"""jetrabbitmq exactly once under failures: the driver SIGKILLed at each protocol point,
RabbitMQ restarted mid-stream, and RabbitMQ restarted — or the connection stalled through a
TCP proxy — while the driver is held between a batch's WAL write and its ack."""

from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from jetspark.datasources.rabbitmq.source import RabbitMQDataSource
from tests.faults_harness import run_script, start_script, wait_held
from tests.integration.scripts.rabbitmq_common import pg_received, publish, wait_counts
from tests.tcp_proxy import TcpProxy

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).parent / "scripts" / "rabbitmq_query.py"
N = 30


def _result(output: str) -> dict:
    line = next(line for line in output.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.mark.parametrize(
    ("fault", "duplicates"),
    [
        # WAL written, Spark's offset log not: the batch is rebuilt from redeliveries
        pytest.param("rabbitmq.after_wal_write@2", (0, 0), marks=pytest.mark.soak),
        # offset log written, batch not run: replayed from the WAL; redeliveries are duplicates
        ("rabbitmq.before_batch@2", (10, 10)),
        # batch committed by Spark, IDs in the dedup store, nothing acked
        pytest.param("rabbitmq.before_ack@1", (10, 10), marks=pytest.mark.soak),
        # half of the batch acked (if the acks left the socket before the kill)
        pytest.param("rabbitmq.during_ack@1", (5, 10), marks=pytest.mark.soak),
    ],
)
def test_driver_killed_at_each_point_delivers_exactly_once(
    amqp_url, rabbit_queue, pg_dsn, pg_schema, tmp_path, fault, duplicates
):
    ids = [f"m{i:03d}" for i in range(N)]
    publish(amqp_url, rabbit_queue, ids)
    args = (amqp_url, rabbit_queue, str(tmp_path / "wal"), str(tmp_path / "cp"), pg_dsn, pg_schema, "10")
    crashed = run_script(SCRIPT, *args, fault=fault, state_dir=tmp_path)
    assert crashed.killed, crashed.output[-3000:]
    resumed = run_script(SCRIPT, *args, state_dir=tmp_path).check_ok()
    assert sorted(pg_received(pg_dsn, pg_schema)) == ids  # each message exactly once
    assert wait_counts(rabbit_queue, (0, 0)) == (0, 0)  # and every one acked
    dups = _result(resumed.output)["counts"]["duplicates"]
    assert duplicates[0] <= dups <= duplicates[1]


def test_rabbitmq_restarted_mid_stream(spark, amqp_url, rabbit_queue, tmp_path):
    from jetspark.devtools.services import local

    spark.dataSource.register(RabbitMQDataSource)
    ids = [f"m{i:03d}" for i in range(40)]
    publish(amqp_url, rabbit_queue, ids)
    batches: dict[int, list[str]] = {}

    def sink(df, batch_id):
        batches[batch_id] = [r.message_id for r in df.where("NOT heartbeat").select("message_id").collect()]
        if batch_id == 1:  # batch 0 unacked until now, batch 1 and the prefetch in flight
            local.restart("rabbitmq")

    stream = (spark.readStream.format("jetrabbitmq").option("url", amqp_url).option("queue", rabbit_queue)
              .option("walLocation", str(tmp_path / "wal")).option("maxMessagesPerTrigger", "10").load())
    query = stream.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "cp")).start()
    try:
        query.processAllAvailable()
        deadline = time.monotonic() + 60
        while sum(len(b) for b in batches.values()) < len(ids) and time.monotonic() < deadline:
            query.processAllAvailable()  # redeliveries arriving after the restart
    finally:
        query.stop()
    assert query.exception() is None
    received = [i for b in sorted(batches) for i in batches[b]]
    assert sorted(received) == ids
    assert wait_counts(rabbit_queue, (0, 0)) == (0, 0)


# Where the driver is held while RabbitMQ restarts, and the duplicates the resumed runs may
# count (deliveries requeued by the cut connection come back and are deduplicated).
RESTART_POINTS = [
    # batch 2 in the WAL, not yet in Spark's offset log: rebuilt from redeliveries
    pytest.param("rabbitmq.after_wal_write@2", (0, 10), id="after-wal-write"),
    # batch 1 committed and in the dedup store, nothing acked: all 10 come back
    pytest.param("rabbitmq.before_ack@1", (10, 10), marks=pytest.mark.soak, id="before-ack"),
    # half of batch 1 acked on the old connection, the other half cut
    pytest.param("rabbitmq.during_ack@1", (5, 10), marks=pytest.mark.soak, id="during-ack"),
]


@pytest.mark.parametrize(("point", "duplicates"), RESTART_POINTS)
def test_rabbitmq_restarted_between_wal_write_and_ack(
    amqp_url, rabbit_queue, pg_dsn, pg_schema, tmp_path, point, duplicates
):
    """The query rides through the restart (its consumer reconnects); a run on the same
    checkpoint then completes: every message once in the table, the queue drained,
    duplicates only counted."""
    from jetspark.devtools.services import local

    _cut_while_held(amqp_url, amqp_url, rabbit_queue, pg_dsn, pg_schema, tmp_path, point, duplicates,
                    cut=lambda: local.restart("rabbitmq"))


# The same points with the connection cut through a TCP proxy that also slows every chunk by
# 5 ms: reset (RST both ways), or stalled — nothing forwarded either way, nothing closed. A
# stalled connection is noticed by the missed heartbeats (2 s here: 2 intervals without a
# frame), by the broker too, which requeues what it had not acked. Those redeliveries may come
# only after the first run's last batch; a trigger that brings duplicates alone writes no
# offset, so its count need not reach the checkpoint (hence the lower bound 0).
NETWORK_POINTS = [
    pytest.param("stall", "rabbitmq.after_wal_write@2", marks=pytest.mark.soak, id="stall-after-wal-write"),
    pytest.param("stall", "rabbitmq.before_ack@1", marks=pytest.mark.soak, id="stall-before-ack"),
    pytest.param("stall", "rabbitmq.during_ack@1", marks=pytest.mark.soak, id="stall-during-ack"),
    pytest.param("reset", "rabbitmq.after_wal_write@2", marks=pytest.mark.soak, id="reset-after-wal-write"),
    pytest.param("reset", "rabbitmq.during_ack@1", marks=pytest.mark.soak, id="reset-during-ack"),
]


@pytest.mark.parametrize(("fault", "point"), NETWORK_POINTS)
def test_rabbitmq_connection_fails_between_wal_write_and_ack(
    amqp_url, rabbit_queue, pg_dsn, pg_schema, tmp_path, fault, point
):
    """A slow network whose connections are reset or stop answering without closing: no wait
    lasts past the heartbeat; every message once, the queue drained, duplicates only counted."""
    parts = urlsplit(amqp_url)
    proxy = TcpProxy(parts.hostname, parts.port)
    proxy.delay_s = 0.005
    try:
        # a heartbeat of 2 s only where it is what ends the cut (a stall); a reset is noticed at
        # once, and the broker's heartbeat (60 s) keeps a loaded machine's pause from losing a
        # healthy connection
        wanted = ["heartbeat=2"] if fault == "stall" else []
        query = "&".join([*wanted, *filter(None, [parts.query])])
        via = urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.port}", f":{proxy.port}"),
                                        query=query))
        assert f":{proxy.port}" in via, "the tests' AMQP URL names no port"
        cut = proxy.stall_open if fault == "stall" else proxy.reset_open
        # a prefetch of one batch: the next batch needs the connection, so the first run meets
        # the stall (with the default window every message is read ahead before the cut, the
        # run ends on what it holds and only its lost acks meet the stall)
        _cut_while_held(via, amqp_url, rabbit_queue, pg_dsn, pg_schema, tmp_path, point, (0, 10),
                        cut=lambda: _cut_some(cut), prefetch="10")
    finally:
        proxy.close()


def _cut_some(cut) -> None:
    assert cut() >= 1  # the consumer's connection at least


def _cut_while_held(url, publish_url, queue, pg_dsn, pg_schema, tmp_path, point, duplicates, cut,
                    prefetch: str = "") -> None:
    """Hold the query at ``point``, ``cut()`` its broker connection, let it go on: it rides
    through, reconnecting; then a run on the same checkpoint completes exactly once."""
    ids = [f"m{i:03d}" for i in range(N)]
    publish(publish_url, queue, ids)
    args = (url, queue, str(tmp_path / "wal"), str(tmp_path / "cp"), pg_dsn, pg_schema, "10", prefetch)
    gate = tmp_path / "gate"
    held = start_script(SCRIPT, *args, fault=f"{point}:hold", state_dir=tmp_path,
                        env={"JETSPARK_FAULT_GATE": str(gate)})
    with held.killed_on_failure():
        try:
            wait_held(gate, held)
            cut()
        finally:
            gate.touch()
        first = held.wait()
    assert first.returncode == 0, first.output[-4000:]  # rides through: every case the docs list
    # and the cut met it: the consumer lost its connection and made a new one in this run
    assert "jetrabbitmq: reconnected to " in first.output, \
        f"the query never reconnected (the cut missed it):\n{first.output[-4000:]}"
    resumed = run_script(SCRIPT, *args, state_dir=tmp_path).check_ok()
    assert sorted(pg_received(pg_dsn, pg_schema)) == ids  # each message exactly once
    assert wait_counts(queue, (0, 0)) == (0, 0)  # and every one acked
    # the counts in the last offset are the checkpoint's running totals
    ends = [_result(run.output) for run in (first, resumed) if run.returncode == 0]
    dups = [end for end in ends if end][-1]["counts"]["duplicates"]
    assert duplicates[0] <= dups <= duplicates[1]
