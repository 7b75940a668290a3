"""The driver's scan: the greatest event time in offset ranges, read with bounded memory."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaException, Message
from confluent_kafka import KafkaError as KError
from confluent_kafka import TopicPartition as KTopicPartition

from jetspark.datasources.kafka.consumers import (
    DATA_LOSS_CODES,
    WAIT_S,
    DataLossError,
    Patience,
    consumer_conf,
    pooled_consumer,
    use_native,
)
from jetspark.datasources.kafka.event_time import EventTimeSpec, watermark_times
from jetspark.datasources.kafka.native import NativeConsumer
from jetspark.errors import JetsparkError


def scan_max_timestamps(
    kafka: Mapping[str, str], ranges: Mapping[tuple[str, int], tuple[int, int]], *,
    fail_on_data_loss: bool, poll_timeout_ms: int, event_time: EventTimeSpec | None = None,
    native: bool | None = None, cutoff_ms: int | None = None, on_malformed: str = "fail",
) -> dict[tuple[str, int], int | None]:
    """Greatest event time in each [start, end) range, read on the driver (bounded memory):
    the record timestamps, or with ``event_time`` the payload's (a malformed one counts
    with its record timestamp, or fails, as ``eventTime.onMalformed`` says). An event time
    later than ``cutoff_ms`` (the batch's cut-off, ``watermark.maxFutureSkew``) counts as
    ``on_malformed`` says, as on the read tasks (:func:`.event_time.watermark_times`).

    ``native``: through the native reader (default: ``use_native()``), with a pooled
    consumer; else confluent-kafka, record by record. Both give the same answer.
    """
    todo = {tp: r for tp, r in ranges.items() if r[1] > r[0]}
    out: dict[tuple[str, int], int | None] = {tp: None for tp in ranges}
    if not todo:
        return out
    counted = _Counted(event_time, on_malformed, cutoff_ms)
    if use_native() if native is None else native:
        with pooled_consumer(kafka, True) as pooled:
            if isinstance(pooled, NativeConsumer):
                out.update(_scan_native(pooled, todo, fail_on_data_loss=fail_on_data_loss,
                                        poll_timeout_ms=poll_timeout_ms, counted=counted))
                return out
    consumer = Consumer(consumer_conf(kafka))
    try:
        consumer.assign([KTopicPartition(t, p, s) for (t, p), (s, _) in todo.items()])
        waited = Patience(poll_timeout_ms)
        while todo:
            msgs = consumer.consume(10_000, WAIT_S)
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
                    if err.code() in DATA_LOSS_CODES:
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
                ts = _greatest_event_time(records, counted)
                if ts is not None:
                    out[tp] = ts if out[tp] is None else max(out[tp], ts)
    except KafkaException as e:
        raise JetsparkError(f"scanning timestamps: {e}") from None
    finally:
        consumer.close()
    return out


_SCAN_CHUNK_ROWS = 100_000


@dataclass(frozen=True)
class _Counted:
    """What of a chunk counts for the watermark: its event times (the field's or the Kafka
    timestamps), without those beyond the cut-off."""

    event_time: EventTimeSpec | None
    on_malformed: str
    cutoff_ms: int | None

    def greatest(self, values: pa.Array, kafka_ms: np.ndarray, *, topic: str, partition: int,
                 offsets: np.ndarray) -> int | None:
        if self.event_time is None and self.cutoff_ms is None:
            return int(kafka_ms.max())
        _col, ms, ignored = watermark_times(self.event_time, self.on_malformed, values, kafka_ms, topic=topic,
                                            partition=partition, offsets=offsets, cutoff_ms=self.cutoff_ms)
        if ignored is not None:
            ms = ms[~ignored]
        return int(ms.max()) if ms.size else None


def _scan_native(consumer: NativeConsumer, todo: Mapping[tuple[str, int], tuple[int, int]], *,
                 fail_on_data_loss: bool, poll_timeout_ms: int,
                 counted: _Counted) -> dict[tuple[str, int], int | None]:
    """``scan_max_timestamps`` with the native reader: one partition after the other, each
    range read in large chunks into Arrow buffers (no Python object per record)."""
    out: dict[tuple[str, int], int | None] = {}
    for tp, (start, end) in todo.items():
        topic, partition = tp
        best: int | None = None
        pos = start
        consumer.assign(topic, partition, pos)
        waited = Patience(poll_timeout_ms)
        while pos < end:
            chunk = consumer.read(min(_SCAN_CHUNK_ROWS, end - pos), end, int(WAIT_S * 1000))
            if not waited.got(chunk.rows or chunk.past_end or chunk.eof_at is not None or chunk.error_code):
                raise JetsparkError(f"no record within kafkaConsumer.pollTimeoutMs={poll_timeout_ms} while "
                                    f"scanning timestamps of topic {topic!r} partition {partition} "
                                    f"(offsets {pos}..{end - 1})")
            if chunk.rows:
                top = counted.greatest(chunk.values, chunk.timestamps, topic=topic, partition=partition,
                                       offsets=chunk.offsets)
                if top is not None:
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


def _greatest_event_time(msgs: list[Message], counted: _Counted) -> int | None:
    """The greatest event time that counts among some records of one partition (None: none)."""
    ts = np.fromiter((m.timestamp()[1] for m in msgs), np.int64, len(msgs))
    if counted.event_time is None and counted.cutoff_ms is None:
        return int(ts.max())
    offsets = np.fromiter(map(Message.offset, msgs), np.int64, len(msgs))
    values = pa.array(list(map(Message.value, msgs)), pa.binary())
    return counted.greatest(values, ts, topic=msgs[0].topic(), partition=msgs[0].partition(), offsets=offsets)
