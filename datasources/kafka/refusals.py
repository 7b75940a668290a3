"""Why the brokers refuse a client: failed authentication or TLS verification.

librdkafka reports these only to the client's error callback and keeps retrying; the call
that waits for the brokers (metadata, offsets, ``init_transactions``) just times out with a
generic "transport failure" or "timed out". So each client gets a :class:`Refusals` as its
``error_cb``, and the waits for the brokers (:func:`jetspark.datasources.kafka.retries.until_answered`,
:func:`flush_until_delivered`) poll the client's callbacks between their slices: a refusal met
during the wait ends it at once with its reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from confluent_kafka import KafkaError

from jetspark.errors import JetsparkError

REFUSED = (KafkaError._AUTHENTICATION, KafkaError._SSL)
SLICE_S = 2.0
WHERE_TO_LOOK = "kafka.security.protocol, kafka.sasl.*, kafka.ssl.*"
#: librdkafka says only "verify that ssl.ca.location is correctly configured", also when the
#: certificate is trusted but names another host than the one in bootstrap.servers.
UNVERIFIED_HINT = ("either kafka.ssl.ca.location lacks the CA that signed the broker's certificate, or "
                   "that certificate does not name the host given in kafka.bootstrap.servers (checked "
                   "while kafka.ssl.endpoint.identification.algorithm is https, the default)")


class KafkaRefused(JetsparkError):
    """The brokers refuse this client (credentials, certificates): retrying cannot help."""


class Polled(Protocol):
    def poll(self, timeout: float) -> object: ...


class Refusals:
    """An ``error_cb`` keeping the last refusal librdkafka reported."""

    def __init__(self) -> None:
        self.last: str | None = None

    def __call__(self, error: KafkaError) -> None:
        if error.code() in REFUSED:
            self.last = error.str()

    def raise_if_refused(self, client: Polled, scrub: Callable[[str], str]) -> None:
        """Serve the client's callbacks; raise :class:`KafkaRefused` when it was refused."""
        client.poll(0)
        if self.last is not None:
            hint = f"; {UNVERIFIED_HINT}" if "certificate verify failed" in self.last else ""
            raise KafkaRefused(f"the Kafka brokers refuse this client: {scrub(self.last)}{hint} "
                               f"(options {WHERE_TO_LOOK})")


class _Flushed(Polled, Protocol):
    def flush(self, timeout: float) -> int: ...


def flush_until_delivered(producer: _Flushed, refusals: Refusals, timeout_s: float,
                          scrub: Callable[[str], str]) -> int:
    """``producer.flush`` in slices: the records still undelivered after ``timeout_s`` (0 when
    all are); :class:`KafkaRefused` as soon as the brokers refuse the producer."""
    refusals.last = None
    deadline = time.monotonic() + timeout_s
    while True:
        remaining = producer.flush(max(0.1, min(SLICE_S, deadline - time.monotonic())))
        if not remaining:
            return 0
        refusals.raise_if_refused(producer, scrub)
        if time.monotonic() >= deadline:
            return remaining
