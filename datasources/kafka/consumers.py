"""Kafka consumers for jetkafka's reads: which reader, their settings, and the per-process
pool that read tasks and the driver's scans share.

Two readers: the native one (:mod:`.native`: librdkafka fills Arrow buffers in C, no Python
object per record) when its extension is built, else confluent-kafka; both run on the same
librdkafka (confluent-kafka's). The environment variable ``JETSPARK_KAFKA_READER=confluent``
forces the latter; so does a ``kafka.*`` setting the native reader refuses.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import confluent_kafka
from confluent_kafka import Consumer, KafkaException
from confluent_kafka import KafkaError as KError

from jetspark.datasources.kafka import native as kafka_native
from jetspark.datasources.kafka.native import NativeConfigError, NativeConsumer
from jetspark.errors import JetsparkError

log = logging.getLogger(__name__)

DATA_LOSS_CODES = {KError._AUTO_OFFSET_RESET, KError.OFFSET_OUT_OF_RANGE}


class DataLossError(JetsparkError):
    """Records the query needed are gone (retention, topic deleted); see ``failOnDataLoss``.
    The message starts with the error class Spark's Kafka source gives the same loss
    (``KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE``; ``PARTITION_OFFSET_CHANGED`` when the
    offset needed is past the partition's end: the topic was deleted and created anew)."""

    def __init__(self, topic: str, partition: int, wanted: int, available: int | str,
                 condition: str = "COULD_NOT_READ_OFFSET_RANGE") -> None:
        self.error_class = f"KAFKA_DATA_LOSS.{condition}"
        super().__init__(
            f"[{self.error_class}] "
            f"data loss in topic {topic!r} partition {partition}: offsets from {wanted} are needed "
            f"but the earliest available offset is {available} (deleted by retention?). Set "
            "failOnDataLoss=false to skip lost records and continue."
        )


WAIT_S = 0.05
READER_ENV = "JETSPARK_KAFKA_READER"
"""``confluent`` forces the confluent-kafka reader; otherwise the native one when it is built."""


def use_native() -> bool:
    """Whether read tasks in this process use the native (librdkafka → Arrow) reader."""
    return kafka_native.AVAILABLE and os.environ.get(READER_ENV, "native") != "confluent"


def reader_description() -> str:
    """Which reader read tasks in this process use, and why (for benchmarks and logs)."""
    if use_native():
        return kafka_native.describe()
    why = (f"{READER_ENV}=confluent" if kafka_native.AVAILABLE
           else f"native reader not built: {kafka_native.IMPORT_ERROR}")
    return f"confluent-kafka {confluent_kafka.version()} ({why})"


class Patience:
    """Counts the time without any message; false once it exceeds the poll timeout."""

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_s = timeout_ms / 1000
        self.since = time.monotonic()

    def got(self, n: int) -> bool:
        now = time.monotonic()
        if n:
            self.since = now
        return now - self.since <= self.timeout_s


def consumer_conf(kafka: Mapping[str, str]) -> dict:
    conf: dict = dict(kafka)
    conf.update({"enable.auto.commit": False, "enable.partition.eof": True, "auto.offset.reset": "error",
                 "enable.auto.offset.store": False})
    # A consumer that reached the log's end has a fetch in flight that the broker holds up to
    # fetch.wait.max.ms; a pooled consumer's next assignment waits for it: 100 ms cost every read
    # task ending at the log's end (and the driver's scan) about 90 ms more than 10 ms does.
    conf.setdefault("fetch.wait.max.ms", "10")
    # librdkafka's 1 MB per partition and fetch holds throughput to a third on a fast link;
    # the prefetch queue stays bounded by queued.max.messages.kbytes (64 MB by default).
    conf.setdefault("max.partition.fetch.bytes", str(16 << 20))
    # Once the prefetch queue holds queued.min.messages (100 000), librdkafka waits
    # fetch.queue.backoff.ms (1 s by default since librdkafka 2.4) before fetching again; a reader
    # that drains it in a fraction of that then idles: 1 M records took 6.4 s instead of 0.8 s.
    conf.setdefault("fetch.queue.backoff.ms", "10")
    return conf


_POOL: OrderedDict[tuple, Consumer | NativeConsumer] = OrderedDict()
_POOL_SIZE = 4
_POOL_LOCK = threading.Lock()  # read tasks and the driver's scans may share the pool


@contextmanager
def pooled_consumer(kafka: Mapping[str, str], native: bool) -> Iterator[Consumer | NativeConsumer]:
    """A consumer for one read task, kept for the next task of this (reused) Python worker.

    Creating a consumer and connecting it costs more than a small micro-batch's read. A
    consumer goes back to the pool, unassigned, only after a read that finished cleanly.
    """
    # group.id is not part of the key: reads assign partitions and never commit, so a consumer
    # of another query with the same settings serves as well (and fewer consumers get closed).
    key = (native, *sorted((k, v) for k, v in kafka.items() if k != "group.id"))
    with _POOL_LOCK:
        consumer = _POOL.pop(key, None)
    consumer = consumer or _new_consumer(kafka, native)
    clean = False
    try:
        yield consumer
        clean = True
    finally:
        if clean:
            try:
                consumer.unassign()
            except (KafkaException, JetsparkError):
                clean = False
        if clean:
            with _POOL_LOCK:
                evicted = [consumer] if key in _POOL else []  # one per key: keep the one there
                if not evicted:
                    _POOL[key] = consumer
                while len(_POOL) > _POOL_SIZE:
                    evicted.append(_POOL.popitem(last=False)[1])
            for old in evicted:
                _close_in_background(old)
        else:
            _close_in_background(consumer)


def _close_in_background(consumer: Consumer | NativeConsumer) -> None:
    """Close without blocking the task: a read task must not wait on librdkafka's destroy."""
    threading.Thread(target=consumer.close, name="jetkafka-consumer-close", daemon=True).start()


CLOSE_TIMEOUT_S = 10.0


def close_pooled_consumers(timeout_s: float = CLOSE_TIMEOUT_S) -> int:
    """Close every pooled consumer; returns how many were closed within ``timeout_s``.

    Registered with ``atexit`` and meant to run while the brokers are still up (a test
    session calls it before stopping its Kafka). The closes run in daemon threads, waited for
    at most ``timeout_s`` in all: a destroy that does not finish (a broker gone) never holds up
    the exit; the native reader also leaves its consumers alone once the interpreter finalizes.
    """
    with _POOL_LOCK:
        consumers = list(_POOL.values())
        _POOL.clear()
    threads = [threading.Thread(target=_quiet_close, args=(c,), name="jetkafka-consumer-close", daemon=True)
               for c in consumers]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout_s
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    left = sum(t.is_alive() for t in threads)
    if left:
        log.warning("jetkafka: %d pooled Kafka consumer(s) did not close within %.0f s; left to the exiting "
                    "process", left, timeout_s)
    return len(threads) - left


def _quiet_close(consumer: Consumer | NativeConsumer) -> None:
    try:
        consumer.close()
    except Exception as e:  # closing at exit: report, do not raise
        log.warning("jetkafka: closing a pooled Kafka consumer: %s", e)


atexit.register(close_pooled_consumers)


def _new_consumer(kafka: Mapping[str, str], native: bool) -> Consumer | NativeConsumer:
    conf = consumer_conf(kafka)
    if native:
        try:
            return NativeConsumer(conf)
        except NativeConfigError as e:  # a setting librdkafka refuses: confluent-kafka reports it
            log.warning("jetkafka reads through confluent-kafka: the native reader cannot take the "
                        "settings: %s", e)
    return Consumer(conf)


_ANNOUNCED: set[bool] = set()


def announce_reader(native: bool) -> None:
    """Say on stderr, once per process and reader, which reader read tasks use: on a cluster
    the executors' logs show whether they read natively (tests/integration/test_demo_cluster.py)."""
    if native in _ANNOUNCED:
        return
    _ANNOUNCED.add(native)
    what = kafka_native.describe() if native else f"confluent-kafka {confluent_kafka.version()}"
    print(f"jetkafka reader: {what} (pid {os.getpid()})", file=sys.stderr, flush=True)
