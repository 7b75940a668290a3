"""Why the brokers refuse a client: failed authentication or TLS verification.

librdkafka reports these only to the client's error callback and keeps retrying; the call
that waits for the brokers (metadata, offsets, ``init_transactions``) just times out with a
generic "transport failure" or "timed out". So each client gets a :class:`Refusals` as its
``error_cb``, and :func:`until_answered` waits for a call in slices (2 s, then twice as long
each time), polling the client's callbacks between them: a refusal met during the wait ends
it at once with its reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from confluent_kafka import KafkaError, KafkaException

from jetspark.errors import JetsparkError

T = TypeVar("T")
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


class _Polled(Protocol):
    def poll(self, timeout: float) -> object: ...


class Refusals:
    """An ``error_cb`` keeping the last refusal librdkafka reported."""

    def __init__(self) -> None:
        self.last: str | None = None

    def __call__(self, error: KafkaError) -> None:
        if error.code() in REFUSED:
            self.last = error.str()

    def raise_if_refused(self, client: _Polled, scrub: Callable[[str], str]) -> None:
        """Serve the client's callbacks; raise :class:`KafkaRefused` when it was refused."""
        client.poll(0)
        if self.last is not None:
            hint = f"; {UNVERIFIED_HINT}" if "certificate verify failed" in self.last else ""
            raise KafkaRefused(f"the Kafka brokers refuse this client: {scrub(self.last)}{hint} "
                               f"(options {WHERE_TO_LOOK})")


def until_answered(call: Callable[[float], T], client: _Polled, refusals: Refusals, timeout_s: float,
                   scrub: Callable[[str], str]) -> T:
    """``call(slice_timeout_s)`` again until it answers or ``timeout_s`` passes (then its last
    error is raised); :class:`KafkaRefused` as soon as the brokers refuse the client."""
    refusals.last = None  # only what this wait meets: an old refusal may have been transient
    deadline = time.monotonic() + timeout_s
    slice_s = SLICE_S
    while True:
        left = deadline - time.monotonic()
        try:
            return call(max(0.1, min(slice_s, left)))
        except KafkaException as e:
            refusals.raise_if_refused(client, scrub)
            error = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
            # _NOENT: "No leaders found" while a restarted broker's partitions elect theirs
            waiting = error is not None and (error.retriable() or error.code() in (
                KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
                KafkaError._NOENT))
            if left <= slice_s or not waiting:
                raise
        slice_s *= 2  # a slow answer gets longer and longer to arrive


class _Flushed(_Polled, Protocol):
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
