"""Endpoints named by JETSPARK_* variables: their addresses, and a stopped one fails fast."""

from __future__ import annotations

import socket

import pytest

from jetspark.devtools.services import acquire
from jetspark.devtools.services.endpoints import addresses, answers
from jetspark.devtools.services.process import free_port
from jetspark.errors import ServiceError


def test_addresses_of_each_kind_of_endpoint() -> None:
    assert addresses("kafka", "127.0.0.1:9092, broker2:19092,SSL://b3:9093") == [
        ("127.0.0.1", 9092), ("broker2", 19092), ("b3", 9093)]
    assert addresses("postgres", "postgresql://u:pw@db.example:6543/x") == [("db.example", 6543)]
    assert addresses("postgres", "host=10.0.0.1 port=5433 dbname=x") == [("10.0.0.1", 5433)]
    assert addresses("postgres", "dbname=x") == [("127.0.0.1", 5432)]
    assert addresses("rabbitmq", "amqps://u:pw@mq:5671/%2F") == [("mq", 5671)]
    assert addresses("rabbitmq", "amqp://mq") == [("mq", 5672)]
    assert addresses("spark", "spark://master:7078") == [("master", 7078)]
    assert addresses("registry", "http://sr:8081/apis/ccompat/v7") == [("sr", 8081)]
    assert addresses("registry", "https://sr.example/apis/ccompat/v7") == [("sr.example", 443)]


def test_a_listening_port_answers_and_a_closed_one_does_not() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert answers("kafka", f"127.0.0.1:{free_port()},127.0.0.1:{server.getsockname()[1]}")
    assert not answers("kafka", f"127.0.0.1:{free_port()}", timeout_s=0.5)
    assert not answers("kafka", "no-such-host.invalid:9092", timeout_s=0.5)  # does not resolve


def test_a_stopped_service_named_by_its_variable_fails_at_once_without_its_password(
        monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    monkeypatch.setenv("JETSPARK_AMQP_URL", f"amqp://user:s3cret-pw@127.0.0.1:{port}/%2F")
    with pytest.raises(ServiceError) as caught:
        acquire(["rabbitmq"])
    message = str(caught.value)
    assert "JETSPARK_AMQP_URL" in message and f"127.0.0.1:{port}" in message
    assert "s3cret-pw" not in message
