"""No secret in jetrabbitmq's warnings: a canary as the broker's password, in the URL the consumer
is given, through a connection lost mid-stream (reset by a TCP proxy) and its reconnect; and a
canary in a WAL folder name that looks like a URL's user info, through the lease's renewal and
release failing when the folder is gone. Each warning is logged, and names neither canary."""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pika
import pytest

from jetspark.datasources.rabbitmq.consumer import QueueConsumer
from jetspark.datasources.rabbitmq.lease import Lease
from jetspark.devtools.services import rabbitmq
from jetspark.devtools.services.process import stop
from jetspark.devtools.services.security import Login
from tests.integration.scripts.rabbitmq_common import publish
from tests.tcp_proxy import TcpProxy

pytestmark = pytest.mark.integration

CANARY = f"Canary{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
def canary_broker(tmp_path_factory) -> Iterator[str]:
    """A broker of the test's own whose one user's password is the canary: its AMQP URL."""
    node = tmp_path_factory.mktemp("canary-rabbitmq") / "node"
    record = rabbitmq.start(node, login=Login("jetspark", CANARY))
    try:
        assert CANARY in record.endpoint
        yield record.endpoint
    finally:
        for proc in record.processes:
            stop(proc)


def _queue(url: str) -> str:
    name = f"jet_{uuid.uuid4().hex[:10]}"
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        conn.channel().queue_declare(name, durable=True)
    finally:
        conn.close()
    return name


def test_a_lost_connection_and_its_reconnect_log_no_password(canary_broker, caplog):
    queue = _queue(canary_broker)
    publish(canary_broker, queue, ["a", "b"])
    parts = urlsplit(canary_broker)
    proxy = TcpProxy(parts.hostname, parts.port)
    via = urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.port}", f":{proxy.port}")))
    consumer = QueueConsumer(via, queue, 10)
    try:
        with caplog.at_level(logging.DEBUG, logger="jetspark"):
            consumer.fetch(1, 5.0)  # connected
            assert proxy.reset_open() >= 1
            # the reset reaches the client's socket asynchronously: service it until it is seen
            deadline = time.monotonic() + 30
            while consumer.reconnects == 0:
                assert time.monotonic() < deadline, "the reset was not seen within 30 s"
                consumer.ensure_open()
            assert consumer.reconnects == 1
        assert "lost" in caplog.text, caplog.text  # the warnings were logged
        assert "jetrabbitmq: reconnected to " in caplog.text, caplog.text
        assert CANARY not in caplog.text and CANARY not in repr(consumer)
    finally:
        consumer.close()
        proxy.close()


def test_the_lease_warnings_show_no_user_info_of_the_wal_folder(tmp_path, caplog):
    wal = tmp_path / f"u:{CANARY}@wal"  # a folder name that looks like user info: never shown
    lease = Lease(str(wal), timeout_ms=300)
    with caplog.at_level(logging.DEBUG, logger="jetspark"):
        lease.acquire()
        shutil.rmtree(lease.directory)
        Path(lease.directory).write_text("not a folder")  # every renewal and the release now fail
        deadline = time.monotonic() + 60
        while "renewing the lease" not in caplog.text:
            assert time.monotonic() < deadline, "no renewal failed within 60 s"
            time.sleep(0.05)
        lease.release()
    assert "renewing the lease" in caplog.text and "could not release the lease" in caplog.text, caplog.text
    assert CANARY not in caplog.text, caplog.text
