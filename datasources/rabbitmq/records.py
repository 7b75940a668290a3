"""From deliveries to WAL rows: message IDs, event times, header values."""

from __future__ import annotations

import datetime as dt
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jetspark.columns import TIMESTAMP_TYPE
from jetspark.datasources.malformed import MAX_EVENT_MS, beyond_cutoff, valid_event_ms
from jetspark.datasources.rabbitmq.consumer import Delivery
from jetspark.datasources.rabbitmq.options import MESSAGE_ID_BODY_HASH, RabbitMQOptions
from jetspark.datasources.rabbitmq.wal import WAL_SCHEMA

HASH_PREFIX = "sha256:"


def body_hash(body: bytes) -> str:
    """The ID of a message by content: equal bodies are ONE message (the caveat of hashing)."""
    return HASH_PREFIX + hashlib.sha256(body).hexdigest()


def message_ids(deliveries: Sequence[Delivery], options: RabbitMQOptions) -> list[str | None]:
    """Each message's ID per option ``messageId`` (None where a message has none)."""
    if options.message_id == MESSAGE_ID_BODY_HASH:
        return [body_hash(d.body) for d in deliveries]
    header = options.message_id_header
    if header is None:
        return [d.properties.message_id or None for d in deliveries]
    values = ((d.properties.headers or {}).get(header) for d in deliveries)
    return [None if v is None or v == "" else header_text(v) for v in values]


def header_text(value: object) -> str:
    """A header value as text: bytes as UTF-8, timestamps as ISO 8601, others via str().
    Bytes that are not UTF-8 keep their values (``\\xff``), as AMQP short strings do, not
    one replacement character for all: distinct binary IDs stay distinct for dedup (only a
    text ID spelling out ``\\xff`` itself would meet the byte 0xff)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return str(value)


MAX_TIMESTAMP_S = MAX_EVENT_MS // 1000
"""The latest AMQP ``timestamp`` property (seconds, unsigned 64 bits on the wire) kept."""
_MAX_S = pa.scalar(MAX_TIMESTAMP_S, pa.uint64())
_UNDECODED = object()  # a header of a table that was not decoded (amqp.MAX_NESTING)


@dataclass(frozen=True)
class EventTimes:
    """A batch's event times in epoch ms (the receive time where absent or malformed) and
    which were malformed (an event time that exists but is not a time in years 1–9999:
    NaN, infinite, out of range, text that is not ISO 8601, undecoded headers; or one later
    than the batch's cut-off, ``watermark.maxFutureSkew``: those are also in ``future``)."""

    ms: np.ndarray
    malformed: np.ndarray
    future: np.ndarray


def event_times_ms(deliveries: Sequence[Delivery], options: RabbitMQOptions, received_ms: int,
                   cutoff_ms: int | None = None) -> EventTimes:
    """Event times in epoch ms: the AMQP timestamp property (seconds) or a header (epoch ms
    as a number, a timestamp, or ISO-8601 text); the receive time where absent, malformed or
    later than ``cutoff_ms`` (None: no cut-off)."""
    header = options.event_time_header
    if header is None:
        seconds = timestamp_seconds(deliveries)
        valid = pc.fill_null(pc.less_equal(seconds, _MAX_S), True).to_numpy(zero_copy_only=False)
        ms = pc.fill_null(seconds, 0).to_numpy(zero_copy_only=False).astype(np.float64) * 1000.0
        absent = seconds.is_null().to_numpy(zero_copy_only=False)
    else:
        values = [_UNDECODED if d.properties.headers_malformed else (d.properties.headers or {}).get(header)
                  for d in deliveries]
        ms, absent = _header_ms(values)
        valid = valid_event_ms(ms)
    future = ~absent & valid & beyond_cutoff(np.floor(np.where(valid, ms, 0.0)), cutoff_ms)
    malformed = ~absent & (~valid | future)
    use_received = absent | malformed
    out = np.where(use_received, 0.0, ms)
    return EventTimes(np.where(use_received, received_ms, np.floor(out).astype(np.int64)), malformed, future)


def timestamp_seconds(deliveries: Sequence[Delivery]) -> pa.Array:
    """The AMQP ``timestamp`` properties (uint64 seconds, null where absent)."""
    return pa.array([d.properties.timestamp for d in deliveries], pa.uint64())


def _header_ms(values: list[object]) -> tuple[np.ndarray, np.ndarray]:
    """(epoch ms as float64, NaN where malformed; absent mask) of header values. Numbers and
    timestamps take one Arrow conversion; only a batch with other values goes value by value."""
    absent = np.fromiter((v is None or isinstance(v, bool) for v in values), bool, len(values))
    try:
        arr = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError, TypeError):
        arr = None
    if arr is not None and (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
        # unsafe: an integer beyond +-2**53 rounds, and is beyond year 9999 anyway (malformed)
        ms = pc.fill_null(pc.cast(arr, pa.float64(), safe=False), 0.0).to_numpy(zero_copy_only=False)
    elif arr is not None and pa.types.is_timestamp(arr.type):
        ms = pc.fill_null(pc.cast(pc.cast(arr, pa.timestamp("us", "UTC")), pa.int64()), 0).to_numpy(
            zero_copy_only=False) / 1000.0
    elif arr is not None and (pa.types.is_null(arr.type) or pa.types.is_boolean(arr.type)):
        ms = np.zeros(len(values))
    else:
        ms = np.fromiter((_header_value_ms(v) for v in values), np.float64, len(values))
    return np.floor(ms), absent


def _header_value_ms(value: object) -> float:
    """One header value's event time in epoch ms; NaN when it is not a time."""
    if value is None or isinstance(value, bool):
        return 0.0
    if isinstance(value, int | float | Decimal):
        try:
            return float(value)
        except (OverflowError, ValueError):
            return math.nan
    if isinstance(value, dt.datetime):
        parsed = value
    elif isinstance(value, str | bytes):
        try:
            parsed = dt.datetime.fromisoformat(header_text(value))
        except ValueError:
            return math.nan
    else:  # tables, arrays, undecoded headers
        return math.nan
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return (parsed - _EPOCH) // dt.timedelta(microseconds=1) / 1000.0


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def to_wal_table(
    deliveries: Sequence[Delivery], ids: Sequence[str], event_ms: np.ndarray, late: np.ndarray,
    null_timestamp: np.ndarray | None = None,
) -> pa.Table:
    """The WAL rows of a batch (WAL_SCHEMA), in delivery order. The ``timestamp`` column is
    null where the property is beyond 9999-12-31, and where ``null_timestamp`` says (a
    timestamp property beyond the batch's cut-off when it is the event time)."""
    props = [d.properties for d in deliveries]
    headers = [
        None if p.headers is None else [(str(k), header_text(v)) for k, v in p.headers.items()]
        for p in props
    ]
    seconds = timestamp_seconds(deliveries)
    in_range = pc.less_equal(seconds, _MAX_S)  # a later one is null (no Spark timestamp)
    if null_timestamp is not None and null_timestamp.any():
        in_range = pc.and_(in_range, pa.array(~null_timestamp))
    stamps = pc.multiply(pc.cast(pc.if_else(in_range, seconds, pa.scalar(None, pa.uint64())), pa.int64()),
                         1_000_000)
    return pa.table(
        [
            pa.array(ids, pa.string()),
            pa.array([d.body for d in deliveries], pa.binary()),
            pa.array([d.routing_key for d in deliveries], pa.string()),
            pa.array([d.exchange for d in deliveries], pa.string()),
            pa.array(headers, WAL_SCHEMA.field("headers").type),
            stamps.cast(TIMESTAMP_TYPE),
            pa.array([d.redelivered for d in deliveries], pa.bool_()),
            pa.array(event_ms, pa.int64()),
            pa.array(late, pa.bool_()),
        ],
        schema=WAL_SCHEMA,
    )
