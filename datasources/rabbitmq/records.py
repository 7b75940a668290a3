"""From deliveries to WAL rows: message IDs, event times, header values."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from jetspark.columns import TIMESTAMP_TYPE
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
    """A header value as text: bytes as UTF-8, timestamps as ISO 8601, others via str()."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return str(value)


def event_times_ms(deliveries: Sequence[Delivery], options: RabbitMQOptions, received_ms: int) -> np.ndarray:
    """Event times in epoch ms: the AMQP timestamp property (seconds) or a header (epoch ms
    as a number, a timestamp, or ISO-8601 text); the receive time where absent."""
    header = options.event_time_header
    if header is None:
        stamps = (d.properties.timestamp for d in deliveries)
        times = (received_ms if ts is None else ts * 1000 for ts in stamps)
    else:
        times = (_header_time_ms((d.properties.headers or {}).get(header), received_ms) for d in deliveries)
    return np.fromiter(times, np.int64, len(deliveries))


def _header_time_ms(value: object, received_ms: int) -> int:
    if value is None or isinstance(value, bool):
        return received_ms
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return int(value.timestamp() * 1000)
    try:
        parsed = dt.datetime.fromisoformat(header_text(value))
    except ValueError:
        return received_ms
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return int(parsed.timestamp() * 1000)


def to_wal_table(
    deliveries: Sequence[Delivery], ids: Sequence[str], event_ms: np.ndarray, late: np.ndarray
) -> pa.Table:
    """The WAL rows of a batch (WAL_SCHEMA), in delivery order."""
    props = [d.properties for d in deliveries]
    headers = [
        None if p.headers is None else [(str(k), header_text(v)) for k, v in p.headers.items()]
        for p in props
    ]
    stamps = [None if p.timestamp is None else int(p.timestamp) * 1_000_000 for p in props]
    return pa.table(
        [
            pa.array(ids, pa.string()),
            pa.array([d.body for d in deliveries], pa.binary()),
            pa.array([d.routing_key for d in deliveries], pa.string()),
            pa.array([d.exchange for d in deliveries], pa.string()),
            pa.array(headers, WAL_SCHEMA.field("headers").type),
            pa.array(stamps, pa.int64()).cast(TIMESTAMP_TYPE),
            pa.array([d.redelivered for d in deliveries], pa.bool_()),
            pa.array(event_ms, pa.int64()),
            pa.array(late, pa.bool_()),
        ],
        schema=WAL_SCHEMA,
    )
