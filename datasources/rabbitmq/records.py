"""From pika deliveries to WAL rows: message IDs, event times, header values."""

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


def message_id_of(d: Delivery, options: RabbitMQOptions) -> str | None:
    """The message's ID per option ``messageId``, or None when the message has none."""
    if options.message_id == MESSAGE_ID_BODY_HASH:
        return body_hash(d.body)
    header = options.message_id_header
    if header is not None:
        value = (d.properties.headers or {}).get(header)
        return None if value is None or value == "" else header_text(value)
    return d.properties.message_id or None


def header_text(value: object) -> str:
    """A header value as text: bytes as UTF-8, timestamps as ISO 8601, others via str()."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return str(value)


def event_time_ms(d: Delivery, options: RabbitMQOptions, received_ms: int) -> int:
    """Event time in epoch ms: the AMQP timestamp property (seconds) or a header
    (epoch ms as a number, a timestamp, or ISO-8601 text); the receive time when absent."""
    header = options.event_time_header
    if header is None:
        ts = d.properties.timestamp
        return received_ms if ts is None else int(ts) * 1000
    value = (d.properties.headers or {}).get(header)
    if value is None:
        return received_ms
    if isinstance(value, bool):
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
