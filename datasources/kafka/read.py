"""Kafka → Arrow: read one offset range of one partition as record batches.

Two readers: the native one (:mod:`.native`: librdkafka fills Arrow buffers in C, no Python
object per record) when its extension is built, else confluent-kafka; both run on the same
librdkafka (confluent-kafka's). The environment variable ``JETSPARK_KAFKA_READER=confluent``
forces the latter; so does a ``kafka.*`` setting the native reader refuses.

Memory stays bounded: records are consumed in chunks of ``chunk_rows`` and each chunk
becomes one ``pyarrow.RecordBatch`` (librdkafka's prefetch queue is bounded by its own
``queued.*`` settings). A read stops by offset, never by a count of records: transactional
topics have offset gaps (control records, aborted data), compacted topics too.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain

import confluent_kafka
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaException, Message
from confluent_kafka import KafkaError as KError
from confluent_kafka import TopicPartition as KTopicPartition

from jetspark import faults
from jetspark.datasources.kafka import native as kafka_native
from jetspark.datasources.kafka.event_time import EventTimeSpec, event_times
from jetspark.datasources.kafka.native import HEADERS_TYPE, NativeConfigError, NativeConsumer
from jetspark.datasources.watermarks import late_mask
from jetspark.errors import JetsparkError

log = logging.getLogger(__name__)

TS_TYPE = pa.timestamp("us", tz="UTC")
_BASE_FIELDS = [
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
    ("offset", pa.int64()), ("timestamp", TS_TYPE), ("timestampType", pa.int32()),
]
_EXTRA_FIELDS = [("watermark", TS_TYPE), ("heartbeat", pa.bool_()), ("late", pa.bool_())]
_DATA_LOSS_CODES = {KError._AUTO_OFFSET_RESET, KError.OFFSET_OUT_OF_RANGE}


class DataLossError(JetsparkError):
    """Records the query needed are gone (retention, topic deleted); see ``failOnDataLoss``."""

    def __init__(self, topic: str, partition: int, wanted: int, available: int | str) -> None:
        super().__init__(
            f"data loss in topic {topic!r} partition {partition}: offsets from {wanted} are needed "
            f"but the earliest available offset is {available} (deleted by retention?). Set "
            "failOnDataLoss=false to skip lost records and continue."
        )


@functools.cache
def arrow_schema(include_headers: bool, event_time: bool = False) -> pa.Schema:
    fields = list(_BASE_FIELDS)
    if include_headers:
        fields.append(("headers", HEADERS_TYPE))
    return pa.schema(fields + _EXTRA_FIELDS + ([("eventTime", TS_TYPE)] if event_time else []))


def spark_schema(include_headers: bool, event_time: bool = False) -> str:
    """The DDL of the source's rows: Spark's Kafka columns, then watermark, heartbeat, late
    (and ``eventTime`` when it comes from the payload, ``eventTime.field``)."""
    cols = ["key binary", "value binary", "topic string", "partition int", "offset bigint",
            "timestamp timestamp", "timestampType int"]
    if include_headers:
        cols.append("headers array<struct<key:string,value:binary>>")
    extra = ["eventTime timestamp"] if event_time else []
    return ", ".join([*cols, "watermark timestamp", "heartbeat boolean", "late boolean", *extra])


@dataclass(frozen=True)
class ReadSettings:
    """What every read task of one query shares."""

    kafka: Mapping[str, str]
    include_headers: bool
    keep_late: bool
    lag_ms: int
    fail_on_data_loss: bool
    poll_timeout_ms: int
    chunk_rows: int
    event_time: EventTimeSpec | None = None
    """Event time from the value's JSON (``eventTime.field``); None: the Kafka timestamp."""


@dataclass(frozen=True)
class RangeSpec:
    """Offsets [start, end) of one partition, with the watermark facts the batch started with."""

    topic: str
    partition: int
    start: int
    end: int
    start_max_ts: int | None
    """Greatest event time of the partition before ``start`` (None: unknown / none)."""
    w_prev: int | None
    """The coalesced watermark the batch started with (Spark's current watermark)."""
    watermark: int | None
    """The batch's coalesced watermark W, stamped on every row."""
    detect_late: bool = True


_WAIT_S = 0.05
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


class _Patience:
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
def _pooled_consumer(kafka: Mapping[str, str], native: bool) -> Iterator[Consumer | NativeConsumer]:
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


def _announce_reader(native: bool) -> None:
    """Say on stderr, once per process and reader, which reader read tasks use: on a cluster
    the executors' logs show whether they read natively (tests/integration/test_demo_cluster.py)."""
    if native in _ANNOUNCED:
        return
    _ANNOUNCED.add(native)
    what = kafka_native.describe() if native else f"confluent-kafka {confluent_kafka.version()}"
    print(f"jetkafka reader: {what} (pid {os.getpid()})", file=sys.stderr, flush=True)


def heartbeat_batch(include_headers: bool, watermark: int | None, event_time: bool = False) -> pa.RecordBatch:
    """One row without payload: ``heartbeat`` true, carrying W so Spark sees it advance."""
    schema = arrow_schema(include_headers, event_time)
    arrays = [pa.nulls(1, f.type) for f in schema]
    arrays[schema.get_field_index("watermark")] = pa.array([_us(watermark)], TS_TYPE)
    arrays[schema.get_field_index("heartbeat")] = pa.array([True])
    arrays[schema.get_field_index("late")] = pa.array([False])
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _us(ms: int | None) -> int | None:
    return None if ms is None else ms * 1000


def read_range(settings: ReadSettings, rng: RangeSpec, *, first: bool = False,
               native: bool | None = None) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``rng`` as Arrow batches (late ones dropped or flagged).

    ``first``: this task also yields a heartbeat row when it produced no row at all, so
    a batch whose ranges hold only gaps still carries its watermark to Spark.
    ``native``: which reader (default: ``use_native()``); both yield the same batches.
    """
    native = use_native() if native is None else native
    produced = 0
    with _pooled_consumer(settings.kafka, native) as consumer:
        _announce_reader(isinstance(consumer, NativeConsumer))
        read = _read_native if isinstance(consumer, NativeConsumer) else _read
        for batch in read(consumer, settings, rng):
            produced += batch.num_rows
            yield batch
    if first and produced == 0:
        yield heartbeat_batch(settings.include_headers, rng.watermark, settings.event_time is not None)


def _read(consumer: Consumer, settings: ReadSettings, rng: RangeSpec) -> Iterator[pa.RecordBatch]:
    pos = rng.start
    consumer.assign([KTopicPartition(rng.topic, rng.partition, pos)])
    running = rng.start_max_ts
    wm_scalar = pa.scalar(_us(rng.watermark), TS_TYPE)
    waited = _Patience(settings.poll_timeout_ms)
    while pos < rng.end:
        # consume() returns when it has n messages or after its timeout: short waits, so gaps
        # (transactions, compaction) at the end of a range cost little.
        msgs = consumer.consume(min(settings.chunk_rows, rng.end - pos), _WAIT_S)
        if not waited.got(len(msgs)):
            raise JetsparkError(
                f"no record from topic {rng.topic!r} partition {rng.partition} within "
                f"kafkaConsumer.pollTimeoutMs={settings.poll_timeout_ms} while reading offsets "
                f"{pos}..{rng.end - 1}"
            )
        if not msgs:
            continue
        eof_at = None
        if any(map(Message.error, msgs)):
            data = []
            for m in msgs:
                err = m.error()
                if err is None:
                    data.append(m)
                elif err.code() == KError._PARTITION_EOF:
                    eof_at = m.offset()
                elif err.code() in _DATA_LOSS_CODES:
                    pos = _on_data_loss(consumer, settings, rng, pos)
                    data = []
                    break
                else:
                    raise JetsparkError(f"reading topic {rng.topic!r} partition {rng.partition}: {err}")
            msgs = data
        if msgs:
            converted = _to_batch(msgs, settings, rng, running, wm_scalar)
            if converted is None:  # every record was at or past the end
                return
            batch, running, last = converted
            yield batch
            faults.point("jetkafka.read_chunk")
            pos = last + 1
        if eof_at is not None and eof_at >= rng.end:
            return


def _read_native(consumer: NativeConsumer, settings: ReadSettings,
                 rng: RangeSpec) -> Iterator[pa.RecordBatch]:
    """``_read`` with the native reader: the same batches, built from librdkafka's buffers."""
    pos = rng.start
    consumer.assign(rng.topic, rng.partition, pos)
    running = rng.start_max_ts
    wm_scalar = pa.scalar(_us(rng.watermark), TS_TYPE)
    waited = _Patience(settings.poll_timeout_ms)
    while pos < rng.end:
        chunk = consumer.read(min(settings.chunk_rows, rng.end - pos), rng.end, int(_WAIT_S * 1000),
                              headers=settings.include_headers)
        if not waited.got(chunk.rows or chunk.past_end or chunk.eof_at is not None or chunk.error_code):
            raise JetsparkError(
                f"no record from topic {rng.topic!r} partition {rng.partition} within "
                f"kafkaConsumer.pollTimeoutMs={settings.poll_timeout_ms} while reading offsets "
                f"{pos}..{rng.end - 1}"
            )
        if chunk.rows:
            event_col, ts = _event_times(settings, rng, chunk.values, chunk.timestamps, chunk.offsets)
            late, running = _late(ts, settings, rng, running)
            stub = _stub(late, settings)
            headers = None if chunk.headers is None else _blank(chunk.headers, stub)
            yield _assemble(settings, rng, wm_scalar, _blank(chunk.keys, stub), _blank(chunk.values, stub),
                            headers, chunk.offsets, chunk.timestamps, chunk.timestamp_types, late, stub,
                            event_col)
            faults.point("jetkafka.read_chunk")
            pos = int(chunk.offsets[-1]) + 1
        if chunk.data_loss:
            low, _high = consumer.get_watermark_offsets(rng.topic, rng.partition, 30)
            pos = _resume_after_loss(settings, rng, pos, low)
            consumer.assign(rng.topic, rng.partition, pos)
        elif chunk.error_code:
            raise JetsparkError(f"reading topic {rng.topic!r} partition {rng.partition}: {chunk.error}")
        if chunk.past_end or (chunk.eof_at is not None and chunk.eof_at >= rng.end):
            return


def _on_data_loss(consumer: Consumer, settings: ReadSettings, rng: RangeSpec, pos: int) -> int:
    low, _high = consumer.get_watermark_offsets(KTopicPartition(rng.topic, rng.partition), timeout=30)
    resume = _resume_after_loss(settings, rng, pos, low)
    consumer.assign([KTopicPartition(rng.topic, rng.partition, resume)])
    return resume


def _resume_after_loss(settings: ReadSettings, rng: RangeSpec, pos: int, low: int) -> int:
    """Where to go on after offsets from ``pos`` were found gone (low: earliest left), or raise."""
    if settings.fail_on_data_loss:
        raise DataLossError(rng.topic, rng.partition, pos, low)
    return max(low, pos)


def _to_batch(msgs: list, settings: ReadSettings, rng: RangeSpec, running: int | None,
              wm_scalar: pa.Scalar) -> tuple[pa.RecordBatch, int | None, int] | None:
    """Arrow batch of the messages before ``rng.end``, the running max event time after them,
    and the last offset kept; None when every message is at or past the end."""
    n = len(msgs)
    first, last = msgs[0].offset(), msgs[-1].offset()
    if last - first + 1 == n:  # no gap: no per-record offset calls
        offsets = np.arange(first, last + 1, dtype=np.int64)
    else:
        offsets = np.fromiter(map(Message.offset, msgs), np.int64, n)
    keep = n if last < rng.end else int(np.searchsorted(offsets, rng.end))
    if keep == 0:
        return None
    if keep < n:
        msgs, offsets, n = msgs[:keep], offsets[:keep], keep
    pairs = np.fromiter(chain.from_iterable(map(Message.timestamp, msgs)), np.int64, 2 * n).reshape(n, 2)
    ts = pairs[:, 1]
    values = pa.array(list(map(Message.value, msgs)), pa.binary())
    event_col, event_ts = _event_times(settings, rng, values, ts, offsets)
    late, running = _late(event_ts, settings, rng, running)
    stub = _stub(late, settings)
    keys = pa.array(list(map(Message.key, msgs)), pa.binary(), mask=stub)
    values = _blank(values, stub)
    headers = None
    if settings.include_headers:
        headers = pa.array([None if h is None else [{"key": k, "value": v} for k, v in h]
                            for h in map(Message.headers, msgs)], HEADERS_TYPE, mask=stub)
    # confluent-kafka: 0 none, 1 create time, 2 log-append time; Spark/Kafka ids: -1, 0, 1.
    types = (pairs[:, 0] - 1).astype(np.int32)
    batch = _assemble(settings, rng, wm_scalar, keys, values, headers, offsets, ts, types, late, stub,
                      event_col)
    return batch, running, int(offsets[-1])


def _event_times(settings: ReadSettings, rng: RangeSpec, values: pa.Array, ts: np.ndarray,
                 offsets: np.ndarray) -> tuple[pa.Array | None, np.ndarray]:
    """The ``eventTime`` column (None without ``eventTime.field``) and the event times, in ms,
    that drive late-record detection: the payload's, else the Kafka timestamps."""
    if settings.event_time is None:
        return None, ts
    return event_times(settings.event_time, values, ts, topic=rng.topic, partition=rng.partition,
                       offsets=offsets)


def _late(ts: np.ndarray, settings: ReadSettings, rng: RangeSpec,
          running: int | None) -> tuple[np.ndarray, int | None]:
    if rng.detect_late:
        return late_mask(ts, running, settings.lag_ms, rng.w_prev)
    return np.zeros(len(ts), dtype=bool), running


def _stub(late: np.ndarray, settings: ReadSettings) -> np.ndarray | None:
    """Which rows lose their payload: late ones, when late records are dropped (None: no row)."""
    return late if (not settings.keep_late and late.any()) else None


def _blank(array: pa.Array, stub: np.ndarray | None) -> pa.Array:
    return array if stub is None else pc.if_else(pa.array(stub), pa.nulls(len(array), array.type), array)


def _assemble(settings: ReadSettings, rng: RangeSpec, wm_scalar: pa.Scalar, keys: pa.Array, values: pa.Array,
              headers: pa.Array | None, offsets: np.ndarray, ts_ms: np.ndarray, types: np.ndarray,
              late: np.ndarray, stub: np.ndarray | None, event_col: pa.Array | None = None) -> pa.RecordBatch:
    """One batch in the source's schema; ``stub`` rows (dropped late records) are heartbeats."""
    n = len(offsets)
    arrays = [
        keys, values,
        pa.repeat(rng.topic, n), pa.repeat(pa.scalar(rng.partition, pa.int32()), n),
        pa.array(offsets, pa.int64()),
        pa.array(ts_ms * 1000, TS_TYPE),
        pa.array(types, pa.int32()),
    ]
    if settings.include_headers:
        arrays.append(headers)
    heartbeat = pa.array(late, pa.bool_()) if stub is not None else pa.repeat(pa.scalar(False), n)
    arrays += [pa.repeat(wm_scalar, n), heartbeat, pa.array(late, pa.bool_())]
    if settings.event_time is not None:
        arrays.append(event_col)
    schema = arrow_schema(settings.include_headers, settings.event_time is not None)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def scan_max_timestamps(
    kafka: Mapping[str, str], ranges: Mapping[tuple[str, int], tuple[int, int]], *,
    fail_on_data_loss: bool, poll_timeout_ms: int, event_time: EventTimeSpec | None = None,
    native: bool | None = None,
) -> dict[tuple[str, int], int | None]:
    """Greatest event time in each [start, end) range, read on the driver (bounded memory):
    the record timestamps, or with ``event_time`` the payload's (a malformed one counts
    with its record timestamp, or fails, as ``eventTime.onMalformed`` says).

    ``native``: through the native reader (default: ``use_native()``), with a pooled
    consumer; else confluent-kafka, record by record. Both give the same answer.
    """
    todo = {tp: r for tp, r in ranges.items() if r[1] > r[0]}
    out: dict[tuple[str, int], int | None] = {tp: None for tp in ranges}
    if not todo:
        return out
    if use_native() if native is None else native:
        with _pooled_consumer(kafka, True) as pooled:
            if isinstance(pooled, NativeConsumer):
                out.update(_scan_native(pooled, todo, fail_on_data_loss=fail_on_data_loss,
                                        poll_timeout_ms=poll_timeout_ms, event_time=event_time))
                return out
    consumer = Consumer(consumer_conf(kafka))
    try:
        consumer.assign([KTopicPartition(t, p, s) for (t, p), (s, _) in todo.items()])
        waited = _Patience(poll_timeout_ms)
        while todo:
            msgs = consumer.consume(10_000, _WAIT_S)
            if not waited.got(len(msgs)):
                raise JetsparkError(f"no record within kafkaConsumer.pollTimeoutMs={poll_timeout_ms} while "
                                    f"scanning timestamps of {sorted(todo)}")
            data: dict[tuple[str, int], list[Message]] = {}
            for m in msgs:
                tp = (m.topic(), m.partition())
                if tp not in todo:
                    continue
                start, end = todo[tp]
                err = m.error()
                if err is not None:
                    if err.code() == KError._PARTITION_EOF:
                        if m.offset() >= end:
                            del todo[tp]
                            consumer.pause([KTopicPartition(*tp)])
                        continue
                    if err.code() in _DATA_LOSS_CODES:
                        low, _ = consumer.get_watermark_offsets(KTopicPartition(*tp), timeout=30)
                        if fail_on_data_loss:
                            raise DataLossError(tp[0], tp[1], start, low)
                        consumer.seek(KTopicPartition(tp[0], tp[1], max(low, start)))
                        continue
                    raise JetsparkError(f"scanning topic {tp[0]!r} partition {tp[1]}: {err}")
                off = m.offset()
                if off >= end:
                    del todo[tp]
                    consumer.pause([KTopicPartition(*tp)])
                    continue
                data.setdefault(tp, []).append(m)
                if off + 1 >= end:
                    del todo[tp]
                    consumer.pause([KTopicPartition(*tp)])
            for tp, records in data.items():
                ts = _greatest_event_time(records, event_time)
                out[tp] = ts if out[tp] is None else max(out[tp], ts)
    except KafkaException as e:
        raise JetsparkError(f"scanning timestamps: {e}") from None
    finally:
        consumer.close()
    return out


_SCAN_CHUNK_ROWS = 100_000


def _scan_native(consumer: NativeConsumer, todo: Mapping[tuple[str, int], tuple[int, int]], *,
                 fail_on_data_loss: bool, poll_timeout_ms: int,
                 event_time: EventTimeSpec | None) -> dict[tuple[str, int], int | None]:
    """``scan_max_timestamps`` with the native reader: one partition after the other, each
    range read in large chunks into Arrow buffers (no Python object per record)."""
    out: dict[tuple[str, int], int | None] = {}
    for tp, (start, end) in todo.items():
        topic, partition = tp
        best: int | None = None
        pos = start
        consumer.assign(topic, partition, pos)
        waited = _Patience(poll_timeout_ms)
        while pos < end:
            chunk = consumer.read(min(_SCAN_CHUNK_ROWS, end - pos), end, int(_WAIT_S * 1000))
            if not waited.got(chunk.rows or chunk.past_end or chunk.eof_at is not None or chunk.error_code):
                raise JetsparkError(f"no record within kafkaConsumer.pollTimeoutMs={poll_timeout_ms} while "
                                    f"scanning timestamps of topic {topic!r} partition {partition} "
                                    f"(offsets {pos}..{end - 1})")
            if chunk.rows:
                ts = chunk.timestamps
                if event_time is not None:
                    _col, ts = event_times(event_time, chunk.values, ts, topic=topic, partition=partition,
                                           offsets=chunk.offsets)
                top = int(ts.max())
                best = top if best is None else max(best, top)
                pos = int(chunk.offsets[-1]) + 1
            if chunk.data_loss:
                low, _high = consumer.get_watermark_offsets(topic, partition, 30)
                if fail_on_data_loss:
                    raise DataLossError(topic, partition, pos, low)
                pos = max(low, pos)
                consumer.assign(topic, partition, pos)
            elif chunk.error_code:
                raise JetsparkError(f"scanning topic {topic!r} partition {partition}: {chunk.error}")
            if chunk.past_end or (chunk.eof_at is not None and chunk.eof_at >= end):
                break
        out[tp] = best
    return out

def _greatest_event_time(msgs: list[Message], event_time: EventTimeSpec | None) -> int:
    """The greatest event time of some records of one partition."""
    ts = np.fromiter((m.timestamp()[1] for m in msgs), np.int64, len(msgs))
    if event_time is None:
        return int(ts.max())
    offsets = np.fromiter(map(Message.offset, msgs), np.int64, len(msgs))
    values = pa.array(list(map(Message.value, msgs)), pa.binary())
    _col, event_ts = event_times(event_time, values, ts, topic=msgs[0].topic(), partition=msgs[0].partition(),
                                 offsets=offsets)
    return int(event_ts.max())
