"""jetkafka through a network that fails: a broker of the test's own is advertised on a TCP
proxy's port (tests/tcp_proxy.py), so every connection the source, the sink and the driver
open goes through the proxy, which slows, resets or stalls them on cue under a live
``jetkafka → jetkafka`` exactly-once query.

The query rides through resets and stalls on librdkafka's reconnects (a stalled request ends
after ``kafka.socket.timeout.ms``); with the network gone for good it stops within the bounds
of its documented timeouts, saying that Kafka was the trouble, and a restart on the same
checkpoint completes. Every test ends with the checks of the kill tests: every input record
once in the output, no Kafka transaction left open.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from pathlib import Path

import pytest

from jetspark.devtools.services.process import free_port
from jetspark.devtools.services.registry import run_dir
from jetspark.faults import ENV_GATE, hold_gate
from tests.faults_harness import run_script, start_script, wait_held
from tests.integration.scripts.jetkafka_common import produce
from tests.integration.test_service_faults_kafka import (
    HANG_BOUND_S,
    PARTITIONS,
    PER_BATCH,
    SCRIPT,
    _check_kafka_output,
    _records,
)
from tests.service_faults import PrivateKafka, create_topic
from tests.tcp_proxy import TcpProxy

pytestmark = pytest.mark.integration

SOCKET_TIMEOUT_MS = 5000
"""``kafka.socket.timeout.ms`` of the queries here (librdkafka's default is 60 s): how long a
request on a stalled connection waits before the connection is closed and the request sent again."""


@pytest.fixture(scope="module")
def proxied():
    """A broker whose clients all connect through a proxy; the proxy forwards again after each test."""
    broker_port = free_port()
    proxy = TcpProxy("127.0.0.1", broker_port)
    node = PrivateKafka(run_dir() / f"test-kafka-net-{uuid.uuid4().hex[:8]}",
                        ports={"broker": broker_port, "controller": free_port()}, advertised_port=proxy.port)
    try:
        node.start()
        yield node, proxy
    finally:
        proxy.close()
        node.stop()


@pytest.fixture
def proxy(proxied):
    proxy = proxied[1]
    yield proxy
    proxy.heal()


@pytest.fixture
def broker(proxied):
    return proxied[0]


def _topics(broker: PrivateKafka) -> tuple[str, str, list[tuple]]:
    suffix = uuid.uuid4().hex[:8]
    topic = create_topic(broker.bootstrap, f"in_{suffix}", PARTITIONS)
    out_topic = create_topic(broker.bootstrap, f"out_{suffix}", PARTITIONS)
    records = _records()
    produce(broker.bootstrap, topic, records)
    return topic, out_topic, records


def _env(**options: str) -> dict[str, str]:
    return {"SERVICE_FAULT_KAFKA_OPTIONS": json.dumps(options)}


PLANNING_BATCH_1 = "jetkafka.latest_offset@2:hold"
"""The driver planning micro-batch 1, batch 0 committed: where the network goes."""
PLANNING_BATCHES_1_2 = "jetkafka.latest_offset@2,3:hold"
"""The driver planning micro-batch 1, then 2: where the connections are reset, then stalled."""
API_TIMEOUT_MS, RETRIES, POLL_TIMEOUT_MS = 30_000, 1, 20_000
"""The network-gone query's ``kafka.default.api.timeout.ms``, ``fetchOffset.numRetries`` and
``kafkaConsumer.pollTimeoutMs``: every wait for Kafka it may make."""
STOP_BOUND_S = (API_TIMEOUT_MS * (1 + RETRIES + 1) + POLL_TIMEOUT_MS) / 1000 + 1
"""How soon after the network goes the query must stop, from its options alone: the topic
listing (one ``kafka.default.api.timeout.ms``), the offset listing (``fetchOffset.numRetries`` + 1
of them) and a read (``kafkaConsumer.pollTimeoutMs``), one after another; +1 s, the log's
resolution."""
_TERMINATED = re.compile(r"^(\d\d/\d\d/\d\d \d\d:\d\d:\d\d) ERROR MicroBatchExecution: Query .* terminated "
                         r"with error", re.M)


@pytest.mark.soak  # the suite's time budget (about 2 minutes): a slice a run
def test_slow_network_reset_and_stalled_connections_under_kafka_to_kafka(broker, proxy, tmp_path):
    """Every chunk delayed 5 ms; the driver is held while it plans micro-batch 1 (batch 0
    committed), every open connection is reset, and the query goes on; held again planning
    batch 2, every open connection stalls (held open, nothing forwarded): the query rides
    through both to its end, and every record is in the output once."""
    topic, out_topic, records = _topics(broker)
    checkpoint = tmp_path / "checkpoint"
    args = ("kafka", broker.bootstrap, topic, str(checkpoint), str(PER_BATCH), "local[2]", out_topic)
    proxy.delay_s = 0.005
    gate = tmp_path / "gate"
    started = start_script(SCRIPT, *args, fault=PLANNING_BATCHES_1_2, state_dir=tmp_path,
                           env={**_env(**{"kafka.socket.timeout.ms": str(SOCKET_TIMEOUT_MS)}),
                                ENV_GATE: str(gate)})
    with started.killed_on_failure():
        for hit, fault in ((2, proxy.reset_open), (3, proxy.stall_open)):
            at = Path(hold_gate(str(gate), hit))
            try:
                wait_held(at, started, HANG_BOUND_S)
                assert (checkpoint / "commits" / str(hit - 2)).exists()
                assert not (checkpoint / "commits" / str(hit - 1)).exists()
                assert fault() >= 1  # connections were open to reset or stall
            finally:
                at.touch()
        run = started.wait(HANG_BOUND_S)
    assert run.returncode == 0 and "DONE" in run.output, \
        f"the query did not ride through:\n{run.output[-5000:]}"
    assert re.search(r"(?i)disconnected.*connection reset", run.output)  # the reset met a client
    assert re.search(r"Timed out \w+Request in flight", run.output)  # and the stall a request in flight
    _check_kafka_output(broker.bootstrap, out_topic, records)


@pytest.mark.soak  # the suite's time budget: make soak runs it (tests/soak, repeated)
def test_network_gone_stops_the_query_within_its_timeouts(broker, proxy, tmp_path):
    """After batch 0 every connection stalls and new ones are never answered: the query stops
    within its bounds — the driver's offset listing (``kafka.default.api.timeout.ms`` a listing,
    ``fetchOffset.numRetries`` more) and the read's ``kafkaConsumer.pollTimeoutMs`` — with an
    error that names Kafka. With the network back, a restart on the same checkpoint completes exactly once."""
    topic, out_topic, records = _topics(broker)
    checkpoint = tmp_path / "checkpoint"
    args = ("kafka", broker.bootstrap, topic, str(checkpoint), str(PER_BATCH), "local[2]", out_topic)
    options = _env(**{"kafka.socket.timeout.ms": str(SOCKET_TIMEOUT_MS),
                      "fetchOffset.numRetries": str(RETRIES),
                      "kafka.default.api.timeout.ms": str(API_TIMEOUT_MS),
                      "kafkaConsumer.pollTimeoutMs": str(POLL_TIMEOUT_MS)})
    gate = tmp_path / "gate"
    started = start_script(SCRIPT, *args, fault=PLANNING_BATCH_1, state_dir=tmp_path,
                           env={**options, ENV_GATE: str(gate)})
    with started.killed_on_failure():
        try:
            wait_held(gate, started, HANG_BOUND_S)
            assert (checkpoint / "commits" / "0").exists() and not (checkpoint / "commits" / "1").exists()
            proxy.stall_connects()
            proxy.stall_open()
            cut = dt.datetime.now().replace(microsecond=0)  # the log's local time, whole seconds
        finally:
            gate.touch()
        run = started.wait(HANG_BOUND_S)
    ended = _TERMINATED.search(run.output)
    assert ended, f"no terminated query in the log:\n{run.output[-5000:]}"
    stopped_after = (dt.datetime.strptime(ended[1], "%y/%m/%d %H:%M:%S") - cut).total_seconds()
    assert stopped_after <= STOP_BOUND_S, f"stopped {stopped_after:.0f} s after the network went"
    assert run.returncode != 0, f"the query ended without Kafka:\n{run.output[-5000:]}"
    # the error names the servers and what bounded the wait (the listing's, or the read's option)
    named = re.search(rf"cannot list (Kafka topics|offsets of .*) at {re.escape(broker.bootstrap)} "
                      r"\((retried up to|\d+ attempts, each retried up to) \d+ s", run.output)
    assert named or "kafkaConsumer.pollTimeoutMs=20000" in run.output, \
        f"the failure does not say what happened:\n{run.output[-5000:]}"
    proxy.heal()
    run_script(SCRIPT, *args, state_dir=tmp_path, timeout_s=HANG_BOUND_S, env=options).check_ok()
    _check_kafka_output(broker.bootstrap, out_topic, records)
