"""Kafka → Arrow: a read task's reader of one offset range of one partition.

Two readers (:mod:`.consumers` chooses): the native one (:mod:`.native`: librdkafka fills
Arrow buffers in C, no Python object per record), else confluent-kafka; both yield the same
batches.

Memory stays bounded: records are consumed in chunks of ``chunk_rows`` and each chunk
becomes one ``pyarrow.RecordBatch`` (librdkafka's prefetch queue is bounded by its own
``queued.*`` settings). A read stops by offset, never by a count of records: transactional
topics have offset gaps (control records, aborted data), compacted topics too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import chain

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, Message
from confluent_kafka import KafkaError as KError
from confluent_kafka import TopicPartition as KTopicPartition

from jetspark import faults
from jetspark.columns import TIMESTAMP_TYPE, blank, filled, filled_text, from_numpy
from jetspark.datasources.kafka.consumers import (
    DATA_LOSS_CODES,
    WAIT_S,
    DataLossError,
    Patience,
    announce_reader,
    pooled_consumer,
    use_native,
)
from jetspark.datasources.kafka.event_time import EventTimeSpec, watermark_times
from jetspark.datasources.kafka.native import HEADERS_TYPE, NativeConsumer
from jetspark.datasources.kafka.retries import retriable
from jetspark.datasources.kafka.schema import arrow_schema, heartbeat_batch, to_us
from jetspark.datasources.kafka.typed_values import TypedValues
from jetspark.datasources.watermarks import late_mask
from jetspark.errors import JetsparkError
from jetspark.redaction import redacted_repr

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReadSettings:
    """What every read task of one query shares."""

    kafka: Mapping[str, str]
    """librdkafka's settings, credentials among them: the repr masks them."""
    include_headers: bool
    keep_late: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int
    chunk_rows: int
    event_time: EventTimeSpec | None = None
    """Event time from the value's JSON (``eventTime.field``); None: the Kafka timestamp."""
    on_malformed: str = "fail"
    """``eventTime.onMalformed``, also for Kafka timestamps beyond the batch's cut-off."""
    typed: tuple[TypedValues, ...] = ()
    """``key.format``, ``value.format``: how the source's tasks decode those columns (key first)."""
    marks: bool = True
    """Rows carry ``watermark``, ``heartbeat``, ``late`` (the query asks for event time)."""

    def __repr__(self) -> str:
        return redacted_repr(self)


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
    future_cutoff: int | None = None
    """The batch's cut-off from its offset (``watermark.maxFutureSkew``): a later event time
    follows ``eventTime.onMalformed`` and counts for no watermark. None: no cut-off."""


def read_range(settings: ReadSettings, rng: RangeSpec, *, first: bool = False,
               native: bool | None = None) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``rng`` as Arrow batches (late ones dropped or flagged).

    ``first``: this task also yields a heartbeat row when it produced no row at all, so
    a batch whose ranges hold only gaps still carries its watermark to Spark.
    ``native``: which reader (default: ``use_native()``); both yield the same batches.
    """
    native = use_native() if native is None else native
    produced = 0
    with pooled_consumer(settings.kafka, native) as consumer:
        announce_reader(isinstance(consumer, NativeConsumer))
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
    wm_us = to_us(rng.watermark)
    waited = Patience(settings.poll_timeout_ms)
    while pos < rng.end:
        # consume() returns when it has n messages or after its timeout: short waits, so gaps
        # (transactions, compaction) at the end of a range cost little.
        msgs = consumer.consume(min(settings.chunk_rows, rng.end - pos), WAIT_S)
        if msgs and any(map(Message.error, msgs)):
            msgs = [m for m in msgs if not _passing(m.error(), rng)]
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
                elif err.code() in DATA_LOSS_CODES:
                    pos = _on_data_loss(consumer, settings, rng, pos)
                    data = []
                    break
                else:
                    raise JetsparkError(f"reading topic {rng.topic!r} partition {rng.partition}: {err}")
            msgs = data
        if msgs:
            converted = _to_batch(msgs, settings, rng, running, wm_us)
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
    wm_us = to_us(rng.watermark)
    waited = Patience(settings.poll_timeout_ms)
    while pos < rng.end:
        chunk = consumer.read(min(settings.chunk_rows, rng.end - pos), rng.end, int(WAIT_S * 1000),
                              headers=settings.include_headers)
        passing = bool(chunk.error_code) and _passing(chunk.error_code, rng, chunk.error)
        if not waited.got(chunk.rows or chunk.past_end or chunk.eof_at is not None
                          or (chunk.error_code and not passing)):
            raise JetsparkError(
                f"no record from topic {rng.topic!r} partition {rng.partition} within "
                f"kafkaConsumer.pollTimeoutMs={settings.poll_timeout_ms} while reading offsets "
                f"{pos}..{rng.end - 1}"
            )
        if chunk.rows:
            event_col, ts, ignored = _event_times(settings, rng, chunk.values, chunk.timestamps,
                                                  chunk.offsets)
            late, running = _late(ts, settings, rng, running, ignored)
            stub = _stub(late, settings)
            headers = None if chunk.headers is None else blank(chunk.headers, stub)
            yield _assemble(settings, rng, wm_us, blank(chunk.keys, stub), blank(chunk.values, stub),
                            headers, chunk.offsets, chunk.timestamps, chunk.timestamp_types, late, stub,
                            event_col, ignored)
            faults.point("jetkafka.read_chunk")
            pos = int(chunk.offsets[-1]) + 1
        if chunk.data_loss:
            low, _high = consumer.get_watermark_offsets(rng.topic, rng.partition, 30)
            pos = _resume_after_loss(settings, rng, pos, low)
            consumer.assign(rng.topic, rng.partition, pos)
        elif passing:  # the reader dropped what it had fetched past the error: fetch it again
            consumer.assign(rng.topic, rng.partition, pos)
        elif chunk.error_code:
            raise JetsparkError(f"reading topic {rng.topic!r} partition {rng.partition}: {chunk.error}")
        if chunk.past_end or (chunk.eof_at is not None and chunk.eof_at >= rng.end):
            return


def _passing(error: KError | int | None, rng: RangeSpec, text: str | None = None) -> bool:
    """Whether a consumer error is one the brokers get over (a broker restarting, a leader
    moving: :mod:`.retries`): librdkafka reconnects and fetches again, the read waits on,
    bounded by ``kafkaConsumer.pollTimeoutMs``. Logged."""
    if error is None or not retriable(error):
        return False
    log.info("jetkafka: reading topic %r partition %d: %s; waiting for the brokers", rng.topic, rng.partition,
             text or error)
    return True


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
              wm_us: int | None) -> tuple[pa.RecordBatch, int | None, int] | None:
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
    event_col, event_ts, ignored = _event_times(settings, rng, values, ts, offsets)
    late, running = _late(event_ts, settings, rng, running, ignored)
    stub = _stub(late, settings)
    keys = pa.array(list(map(Message.key, msgs)), pa.binary(), mask=stub)
    values = blank(values, stub)
    headers = None
    if settings.include_headers:
        headers = pa.array([None if h is None else [{"key": k, "value": v} for k, v in h]
                            for h in map(Message.headers, msgs)], HEADERS_TYPE, mask=stub)
    # confluent-kafka: 0 none, 1 create time, 2 log-append time; Spark/Kafka ids: -1, 0, 1.
    types = (pairs[:, 0] - 1).astype(np.int32)
    batch = _assemble(settings, rng, wm_us, keys, values, headers, offsets, ts, types, late, stub,
                      event_col, ignored)
    return batch, running, int(offsets[-1])


def _event_times(settings: ReadSettings, rng: RangeSpec, values: pa.Array, ts: np.ndarray,
                 offsets: np.ndarray) -> tuple[pa.Array | None, np.ndarray, np.ndarray | None]:
    """The ``eventTime`` column (None without ``eventTime.field``), the event times, in ms,
    that drive late-record detection (the payload's, else the Kafka timestamps), and which
    records count for none (beyond the batch's cut-off; None: all count)."""
    return watermark_times(settings.event_time, settings.on_malformed, values, ts, topic=rng.topic,
                           partition=rng.partition, offsets=offsets, cutoff_ms=rng.future_cutoff)


def _late(ts: np.ndarray, settings: ReadSettings, rng: RangeSpec, running: int | None,
          ignored: np.ndarray | None) -> tuple[np.ndarray, int | None]:
    if rng.detect_late:
        return late_mask(ts, running, rng.w_prev, ignored)
    return np.zeros(len(ts), dtype=bool), running


def _stub(late: np.ndarray, settings: ReadSettings) -> np.ndarray | None:
    """Which rows lose their payload: late ones, when late records are dropped (None: no row)."""
    return late if (not settings.keep_late and late.any()) else None


def _assemble(settings: ReadSettings, rng: RangeSpec, wm_us: int | None, keys: pa.Array, values: pa.Array,
              headers: pa.Array | None, offsets: np.ndarray, ts_ms: np.ndarray, types: np.ndarray,
              late: np.ndarray, stub: np.ndarray | None, event_col: pa.Array | None = None,
              ignored: np.ndarray | None = None) -> pa.RecordBatch:
    """One batch in the source's schema; ``stub`` rows (dropped late records) are heartbeats.
    ``ignored`` records (beyond the cut-off) have a null ``timestamp`` when it is their event
    time (no ``eventTime.field``; with it, their ``eventTime`` is already null). Built from
    buffers (:func:`jetspark.columns.from_numpy`): a read task does not import pandas."""
    n = len(offsets)
    null_ts = ignored if settings.event_time is None else None
    arrays = [
        keys, values,
        filled_text(rng.topic, n), filled(rng.partition, pa.int32(), n),
        from_numpy(offsets, pa.int64()),
        from_numpy(np.asarray(ts_ms, np.int64) * 1000, TIMESTAMP_TYPE, mask=null_ts),
        from_numpy(types, pa.int32()),
    ]
    if settings.include_headers:
        arrays.append(headers)
    if settings.marks:
        heartbeat = from_numpy(late, pa.bool_()) if stub is not None else filled(False, pa.bool_(), n)
        arrays += [filled(wm_us, TIMESTAMP_TYPE, n), heartbeat, from_numpy(late, pa.bool_())]
    if settings.event_time is not None:
        arrays.append(event_col)
    schema = arrow_schema(settings.include_headers, settings.event_time is not None, settings.marks)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


