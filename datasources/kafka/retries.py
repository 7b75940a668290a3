"""The one retry policy of every call jetkafka (source and sink) makes to Kafka.

A call that fails with a *retriable* error — the brokers cannot answer yet, but will: a
broker restarting or moving a partition's leadership (``UNKNOWN_LEADER_EPOCH``, ``NOT_LEADER…``,
``LEADER_NOT_AVAILABLE``, "No leaders found"), a coordinator loading its state, a connection
refused or timed out — is made again, with an exponential back-off (100 ms doubling to 1 s,
as Kafka's Java clients' ``retry.backoff.ms`` / ``retry.backoff.max.ms``), until it answers or
its deadline passes; then the last error is raised. The deadline is option
``kafka.default.api.timeout.ms`` (60 s, the Java consumer's and admin client's default, which
Spark's Kafka connector rides on): jetspark reads it, librdkafka never sees it. A call that
waits for an answer is given slices of the deadline (2 s, then twice as long each time), so a
slow answer gets longer and longer to arrive. Any other error is raised at once, and the
brokers refusing the client (credentials, certificates: :mod:`.refusals`) ends the wait with
its reason.

Spark's own retry options keep their meaning on top of this: ``fetchOffset.numRetries`` /
``fetchOffset.retryIntervalMs`` retry a whole offset listing that failed after its deadline, as
Spark's offset reader retries a failed admin call; ``kafkaConsumer.pollTimeoutMs`` bounds how
long a read task waits without a record, retriable consumer errors included.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

from jetspark.datasources.kafka.refusals import Polled, Refusals
from jetspark.errors import OptionError

T = TypeVar("T")

API_TIMEOUT = "default.api.timeout.ms"
"""The ``kafka.*`` setting that is the deadline (jetspark's, taken out of librdkafka's settings)."""
API_TIMEOUT_MS = 60_000
SLICE_S = 2.0
FIRST_BACKOFF_S = 0.1
MAX_BACKOFF_S = 1.0

#: Errors the brokers answer while they cannot serve a request yet; librdkafka flags few of
#: them retriable when they come back per partition or per resource (Kafka's Java clients treat
#: each as a ``RetriableException``).
RETRIABLE_CODES = frozenset({
    KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH, KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE, KafkaError.PREFERRED_LEADER_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR,
    KafkaError.NOT_CONTROLLER, KafkaError.REQUEST_TIMED_OUT, KafkaError.NETWORK_EXCEPTION,
    KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    KafkaError.KAFKA_STORAGE_ERROR, KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.UNSTABLE_OFFSET_COMMIT,
    KafkaError.CONCURRENT_TRANSACTIONS,
    KafkaError.THROTTLING_QUOTA_EXCEEDED,
    # librdkafka's own: no connection, no answer in time, "No leaders found" (_NOENT) while a
    # restarted broker's partitions elect theirs, a coordinator still being looked up
    KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._TIMED_OUT_QUEUE, KafkaError._ALL_BROKERS_DOWN,
    KafkaError._NOENT, KafkaError._WAIT_COORD, KafkaError._RETRY, KafkaError._RESOLVE,
})


def retriable(error: object) -> bool:
    """Whether ``error`` (a KafkaError, a KafkaException of one, or an error code) is worth
    asking again: the brokers cannot answer yet, but will."""
    if isinstance(error, KafkaException):
        error = error.args[0] if error.args else None
    if isinstance(error, int):
        return error in RETRIABLE_CODES
    if not isinstance(error, KafkaError):
        return False
    if error.fatal() or error.txn_requires_abort():
        return False
    return error.retriable() or error.code() in RETRIABLE_CODES


def api_timeout_ms(kafka: Mapping[str, str]) -> int:
    """``kafka.default.api.timeout.ms`` from the ``kafka.*`` settings (prefix stripped), checked."""
    raw = kafka.get(API_TIMEOUT)
    if raw is None:
        return API_TIMEOUT_MS
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = -1
    if value < 0:
        raise OptionError(f"kafka.{API_TIMEOUT}", raw,
                          "an integer >= 0: milliseconds a call to Kafka is retried while the brokers "
                          "answer with retriable errors (0: tried once)")
    return value


def without_api_timeout(kafka: Mapping[str, str]) -> dict[str, str]:
    """The settings for librdkafka, which has no ``default.api.timeout.ms``."""
    return {k: v for k, v in kafka.items() if k != API_TIMEOUT}


def until_answered(call: Callable[[float], T], client: Polled | None, refusals: Refusals | None,
                   timeout_s: float, scrub: Callable[[str], str]) -> T:
    """``call(slice_timeout_s)`` again, after a back-off, while it fails with a retriable error
    and ``timeout_s`` has not passed (then its last error is raised); :class:`KafkaRefused`
    as soon as the brokers refuse the client (whose ``error_cb`` is ``refusals``; None: a
    client that must not be polled, e.g. a consumer with an assignment); any other error at once."""
    if refusals is not None:
        refusals.last = None  # only what this wait meets: an old refusal may have been transient
    deadline = time.monotonic() + timeout_s
    slice_s, backoff_s = SLICE_S, FIRST_BACKOFF_S
    while True:
        left = deadline - time.monotonic()
        try:
            return call(max(0.1, min(slice_s, left)))
        except KafkaException as e:
            if client is not None and refusals is not None:
                refusals.raise_if_refused(client, scrub)
            left = deadline - time.monotonic()
            if left <= 0 or not retriable(e):
                raise
        time.sleep(min(backoff_s, left))
        backoff_s = min(backoff_s * 2, MAX_BACKOFF_S)
        slice_s *= 2  # a slow answer gets longer and longer to arrive
