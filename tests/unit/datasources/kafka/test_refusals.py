"""Refusals end a wait for the brokers at once; other waits go on until their timeout."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from jetspark.datasources.kafka.refusals import KafkaRefused, Refusals, flush_until_delivered
from jetspark.datasources.kafka.retries import until_answered


class _Client:
    """Fails ``failures`` calls with a transport error; ``refuse`` reports a refusal when polled."""

    def __init__(self, refusals: Refusals, failures: int, refuse: bool = False) -> None:
        self.refusals, self.failures, self.refuse, self.calls = refusals, failures, refuse, 0

    def poll(self, timeout: float) -> int:
        if self.refuse:
            self.refusals(KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: Authentication "
                                     "failed (password=hunter2x)"))
        self.refusals(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))  # not a refusal
        return 0

    def call(self, timeout: float) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Broker transport failure"))
        return "answer"

    def flush(self, timeout: float) -> int:
        self.calls += 1
        return 0 if self.calls > self.failures else 3


def _scrub(text: str) -> str:
    return text.replace("hunter2x", "***")


def test_transport_failures_are_waited_out():
    r = Refusals()
    client = _Client(r, failures=2)
    assert until_answered(client.call, client, r, 30, _scrub) == "answer"
    assert client.calls == 3


def test_a_refusal_ends_the_wait_with_its_reason_scrubbed():
    r = Refusals()
    client = _Client(r, failures=100, refuse=True)
    with pytest.raises(KafkaRefused, match="Authentication failed") as err:
        until_answered(client.call, client, r, 30, _scrub)
    assert client.calls == 1 and "hunter2x" not in str(err.value)
    assert "kafka.sasl.*" in str(err.value)


def test_without_an_answer_the_last_error_is_raised_at_the_timeout():
    r = Refusals()
    client = _Client(r, failures=100)
    with pytest.raises(KafkaException):
        until_answered(client.call, client, r, 0.0, _scrub)


def test_flush_stops_at_a_refusal_and_reports_what_is_left_at_the_timeout():
    r = Refusals()
    assert flush_until_delivered(_Client(r, failures=1), r, 30, _scrub) == 0
    with pytest.raises(KafkaRefused):
        flush_until_delivered(_Client(r := Refusals(), failures=100, refuse=True), r, 30, _scrub)
    r = Refusals()
    assert flush_until_delivered(_Client(r, failures=100), r, 0.0, _scrub) == 3


def test_an_unverified_certificate_names_both_causes_librdkafka_leaves_out():
    r = Refusals()
    r(KafkaError(KafkaError._SSL, "SSL handshake failed: certificate verify failed: broker certificate could "
                                  "not be verified, verify that ssl.ca.location is correctly configured"))
    with pytest.raises(KafkaRefused) as err:
        r.raise_if_refused(_Client(r, failures=0), _scrub)
    assert "kafka.ssl.ca.location lacks the CA" in str(err.value)
    assert "does not name the host given in kafka.bootstrap.servers" in str(err.value)
