"""DataFrame columns → Kafka records, as Spark's Kafka sink defines them.

Columns: ``value`` (string or binary, required), ``key`` (string or binary), ``topic``
(string; required unless the ``topic`` option is set, which overrides it as in Spark),
``partition`` (int), ``headers`` (array<struct<key: string, value: binary>>). Other
columns are ignored, as in Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import types as T

from jetspark.sinks.transactional import SinkError

_BYTES_LIKE = (T.StringType, T.BinaryType)
HEADERS_TYPE = "array<struct<key: string, value: binary>>"


@dataclass(frozen=True)
class KafkaColumns:
    """Which of the Kafka columns the DataFrame has."""

    key: bool
    topic: bool
    partition: bool
    headers: bool


def check_schema(schema: T.StructType, default_topic: str | None) -> KafkaColumns:
    """Validate the DataFrame for the Kafka sink; the error lists every problem."""
    fields = {f.name.lower(): f for f in schema.fields}
    problems = []

    def check(name: str, ok: Callable[[T.DataType], bool], accepted: str) -> bool:
        f = fields.get(name)
        if f is None:
            return False
        if not ok(f.dataType):
            problems.append(f"column {name!r} is {f.dataType.simpleString()}; accepted: {accepted}")
        return True

    if not check("value", lambda t: isinstance(t, _BYTES_LIKE), "string or binary"):
        problems.append("required column 'value' (string or binary) is missing")
    key = check("key", lambda t: isinstance(t, _BYTES_LIKE), "string or binary")
    topic = check("topic", lambda t: isinstance(t, T.StringType), "string")
    partition = check("partition", lambda t: isinstance(t, T.IntegerType), "int")
    headers = check("headers", _is_headers, HEADERS_TYPE)
    if not topic and default_topic is None:
        problems.append("no topic: set the option 'topic' or add a 'topic' column")
    if problems:
        raise SinkError("the DataFrame does not fit the Kafka sink: " + "; ".join(problems))
    return KafkaColumns(key, topic, partition, headers)


def _is_headers(t: T.DataType) -> bool:
    if not isinstance(t, T.ArrayType) or not isinstance(t.elementType, T.StructType):
        return False
    inner = {f.name: f.dataType for f in t.elementType.fields}
    return (set(inner) == {"key", "value"} and isinstance(inner["key"], T.StringType)
            and isinstance(inner["value"], _BYTES_LIKE))


def _column(batch: pa.RecordBatch, name: str) -> pa.Array:
    index = [n.lower() for n in batch.schema.names].index(name)
    return batch.column(index)


def produce_batch(produce: Callable, poll: Callable, batch: pa.RecordBatch, columns: KafkaColumns,
                  default_topic: str | None) -> int:
    """Hand every row of ``batch`` to the producer; wait (poll) when its queue is full."""
    n = batch.num_rows
    values = _column(batch, "value").to_pylist()
    keys = _column(batch, "key").to_pylist() if columns.key else None
    # As in Spark's Kafka sink, the topic option overrides the topic column.
    topics = _column(batch, "topic").to_pylist() if columns.topic and default_topic is None else None
    partitions = _column(batch, "partition").to_pylist() if columns.partition else None
    headers = _column(batch, "headers").to_pylist() if columns.headers else None
    if topics is None and partitions is None and headers is None:
        _produce_simple(produce, poll, default_topic, values, keys)
        return n
    for i in range(n):
        topic = topics[i] if topics is not None else default_topic
        if topic is None:
            raise SinkError("a row has a null 'topic' and no option 'topic' is set")
        kwargs = {}
        if partitions is not None and partitions[i] is not None:
            kwargs["partition"] = partitions[i]
        if headers is not None and headers[i]:
            kwargs["headers"] = [(h["key"], h["value"]) for h in headers[i]]
        key = keys[i] if keys is not None else None
        while True:
            try:
                produce(topic, values[i], key, **kwargs)
                break
            except BufferError:
                poll(0.05)
    return n


def _produce_simple(produce: Callable, poll: Callable, topic: str | None, values: list,
                    keys: list | None) -> None:
    """The common case (value, maybe key, one topic) in a tight loop."""
    if keys is None:
        keys = [None] * len(values)
    for value, key in zip(values, keys, strict=True):
        try:
            produce(topic, value, key)
        except BufferError:
            while True:
                poll(0.05)
                try:
                    produce(topic, value, key)
                    break
                except BufferError:
                    continue
