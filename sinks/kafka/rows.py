"""DataFrame columns → Kafka records, as Spark's Kafka sink defines them.

Columns: ``value`` (string or binary, required), ``key`` (string or binary), ``topic``
(string; required unless the ``topic`` option is set, which overrides it as in Spark),
``partition`` (int), ``headers`` (array<struct<key: string, value: binary>>). Other
columns are ignored, as in Spark.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, KafkaException
from pyspark.sql import types as T

from jetspark.sinks.kafka.typed_values import TypedValues
from jetspark.sinks.transactional import SinkError

_BYTES_LIKE = (T.StringType, T.BinaryType)
HEADERS_TYPE = "array<struct<key: string, value: binary>>"


@dataclass(frozen=True)
class KafkaColumns:
    """Which of the Kafka columns the DataFrame has, and how its typed ones are encoded."""

    key: bool
    topic: bool
    partition: bool
    headers: bool
    typed: tuple[TypedValues, ...] = ()
    """The columns ``key.format`` / ``value.format`` type: encoded before they are produced."""

    def encode(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, dict[int, Unfit]]:
        """``batch`` with its typed columns encoded, and the rows that do not fit."""
        unfit: dict[int, Unfit] = {}
        for typed in self.typed:
            batch, why = typed.encode(batch)
            for row, reason in why.items():
                unfit.setdefault(row, Unfit(reason))
        return batch, unfit


def check_schema(schema: T.StructType, default_topic: str | None,
                 typed: tuple[TypedValues, ...] = ()) -> KafkaColumns:
    """Validate the DataFrame for the Kafka sink; the error lists every problem. A typed
    column has been checked against its schema (:mod:`jetspark.sinks.kafka.typed_values`)."""
    fields = {f.name.lower(): f for f in schema.fields}
    typed_columns = {t.column for t in typed}
    if typed_columns:
        fields = {name: (T.StructField(name, T.BinaryType()) if name in typed_columns else f)
                  for name, f in fields.items()}
        if "value" in typed_columns:
            fields.setdefault("value", T.StructField("value", T.BinaryType()))
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
    return KafkaColumns(key, topic, partition, headers, typed)


def _is_headers(t: T.DataType) -> bool:
    if not isinstance(t, T.ArrayType) or not isinstance(t.elementType, T.StructType):
        return False
    inner = {f.name: f.dataType for f in t.elementType.fields}
    return (set(inner) == {"key", "value"} and isinstance(inner["key"], T.StringType)
            and isinstance(inner["value"], _BYTES_LIKE))


def _column(batch: pa.RecordBatch, name: str) -> pa.Array:
    index = [n.lower() for n in batch.schema.names].index(name)
    return batch.column(index)


class Unfit(NamedTuple):
    """Why Kafka will not take a record."""

    reason: str
    too_large: bool = False
    """The record is over the producer's ``message.max.bytes``: its dead letter has no value."""


class Rejection(NamedTuple):
    """A row Kafka will not take, found before or when it is handed to the producer."""

    row: int
    topic: str | None
    partition: int | None
    why: Unfit


#: What the sink does with a rejected row: raise (``onRejected=fail``) or keep it elsewhere.
Reject = Callable[[Rejection, object, object, list | None], None]
#: A topic's partition count, or None when not known (yet: the broker may be creating it).
PartitionCount = Callable[[str], "int | None"]
#: A topic's ``max.message.bytes``, or None when not known (:mod:`.limits`).
SizeLimit = Callable[[str], "int | None"]

BATCH_FRAMING = 61
"""A record batch's header in Kafka's v2 format: what a record alone in its batch adds."""
RECORD_FRAMING = 30
"""A record's own framing at most: its length, attributes, timestamp and offset deltas, the
key's and value's lengths and the header count (varints)."""
HEADER_FRAMING = 10
"""A header's framing at most: the varint lengths of its name and value."""

#: librdkafka errors of ``produce()`` that are about the record, not the client or the cluster.
RECORD_ERRORS = (KafkaError.MSG_SIZE_TOO_LARGE, KafkaError._UNKNOWN_PARTITION, KafkaError._INVALID_ARG)
MAX_TOPIC_LENGTH = 249
_TOPIC_RE = re.compile(rf"^[A-Za-z0-9._-]{{1,{MAX_TOPIC_LENGTH}}}$")
MAX_TOPIC_SHOWN = 300
"""A refused topic name is shown (reasons, dead letters) up to this many characters."""
TOPIC_ACCEPTED = f"a Kafka topic name: 1 to {MAX_TOPIC_LENGTH} of A-Z a-z 0-9 . _ -, not '.' or '..'"


def topic_name_problem(topic: str) -> str | None:
    """Why Kafka would refuse ``topic`` as a name (its own rule), or None."""
    if _TOPIC_RE.match(topic) and topic not in (".", ".."):
        return None
    shown = topic
    if len(topic) > MAX_TOPIC_SHOWN:
        shown = f"{topic[:MAX_TOPIC_SHOWN]}…[cut: {len(topic)} characters]"
    return f"topic {shown!r} is not a valid topic name ({TOPIC_ACCEPTED})"


def produce_batch(produce: Callable, poll: Callable, batch: pa.RecordBatch, columns: KafkaColumns,
                  default_topic: str | None, reject: Reject, partitions: PartitionCount,
                  limits: SizeLimit | None = None) -> int:
    """Hand every row of ``batch`` to the producer (waiting, by ``poll``, when its queue is
    full); a row Kafka will not take, or whose typed key or value does not fit its schema,
    goes to ``reject``. The number of rows handed over. ``partitions`` is asked once per topic
    of the batch, and only with a ``partition`` column; ``limits`` (each topic's
    ``max.message.bytes``) once per topic of the batch."""
    batch, unfit_values = columns.encode(batch)
    n = batch.num_rows
    if limits is not None and default_topic is not None:  # the topic option: every row's topic
        limit = limits(default_topic)
        if limit is not None:
            unfit_values = {**_over_limit(record_sizes(batch, columns), None, default_topic, limit),
                            **unfit_values}
    values = _column(batch, "value").to_pylist()
    keys = _column(batch, "key").to_pylist() if columns.key else [None] * n
    # As in Spark's Kafka sink, the topic option overrides the topic column.
    topic_column = _column(batch, "topic") if columns.topic and default_topic is None else None
    partition_column = _column(batch, "partition") if columns.partition else None
    headers = _column(batch, "headers").to_pylist() if columns.headers else None
    rejected = 0
    if topic_column is None and partition_column is None and headers is None and not unfit_values:
        for i, (value, key) in enumerate(zip(values, keys, strict=True)):
            try:
                produce(default_topic, value, key)
                continue
            except BufferError:  # the producer's queue is full: wait, then produce it again
                poll(0.05)
                why = produce_record(produce, poll, default_topic, value, key, None, None)
            except KafkaException as e:
                why = _record_error(e)
            if why is not None:
                reject(Rejection(i, default_topic, None, why), value, key, None)
                rejected += 1
        return n - rejected
    topics = topic_column.to_pylist() if topic_column is not None else [default_topic] * n
    given = partition_column.to_pylist() if partition_column is not None else [None] * n
    unfit = {**unfit_values, **_unfit_rows(n, topic_column, partition_column, default_topic, partitions)}
    if topic_column is not None and limits is not None:
        unfit = {**_topic_limits(batch, columns, topic_column, limits), **unfit}
    for i in range(n):
        row_headers = [(h["key"], h["value"]) for h in headers[i] or ()] if headers is not None else None
        why = unfit.get(i) or produce_record(produce, poll, topics[i], values[i], keys[i], given[i],
                                             row_headers)
        if why is not None:
            reject(Rejection(i, topics[i], given[i], why), values[i], keys[i], row_headers)
            rejected += 1
    return n - rejected


def _unfit_rows(n: int, topics: pa.Array | None, partitions: pa.Array | None, default_topic: str | None,
                count: PartitionCount) -> dict[int, Unfit]:
    """The rows that cannot go where their columns say, found before the producer sees them,
    per topic of the batch: a null or invalid topic, a partition the topic lacks."""
    if topics is None:
        topics = pa.array([default_topic] * n, pa.string())
    out: dict[int, Unfit] = {}
    for i in _indices(pc.is_null(topics)):
        out[i] = Unfit("its topic is null and option 'topic' is not set")
    for topic in pc.unique(topics.drop_null()).to_pylist():
        rows = pc.equal(topics, topic)
        problem = topic_name_problem(topic)
        if problem is not None:
            out.update((i, Unfit(problem)) for i in _indices(rows))
            continue
        known = count(topic) if partitions is not None else None
        if known is None:
            continue
        outside = pc.or_(pc.less(partitions, 0), pc.greater_equal(partitions, known))
        for i in _indices(pc.and_(rows, outside)):
            out[i] = Unfit(f"partition {partitions[i].as_py()} does not exist: topic {topic!r} has {known} "
                           f"partitions")
    return out


def record_sizes(batch: pa.RecordBatch, columns: KafkaColumns) -> np.ndarray:
    """Each row's size as a record alone in a batch, before compression: what a broker holds
    against its topic's ``max.message.bytes`` (key, value and headers with Kafka's framing)."""
    n = batch.num_rows
    sizes = np.full(n, BATCH_FRAMING + RECORD_FRAMING, np.int64)
    for name, present in (("value", True), ("key", columns.key)):
        if present:
            sizes += _lengths(_column(batch, name))
    if columns.headers:
        headers = _column(batch, "headers")
        flat = headers.flatten()
        each = (_lengths(flat.field("key")) + _lengths(flat.field("value")) + HEADER_FRAMING)
        parents = pc.list_parent_indices(headers).to_numpy(zero_copy_only=False)
        sizes += np.bincount(parents, weights=each, minlength=n).astype(np.int64)
    return sizes


def _lengths(array: pa.Array) -> np.ndarray:
    """Bytes of each string or binary value (0 for null)."""
    return pc.fill_null(pc.binary_length(array), 0).to_numpy(zero_copy_only=False).astype(np.int64)


def _over_limit(sizes: np.ndarray, rows: np.ndarray | None, topic: str, limit: int) -> dict[int, Unfit]:
    """The rows (of ``rows``, else all) whose record is larger than ``topic``'s limit."""
    over = sizes > limit if rows is None else (sizes > limit) & rows
    return {int(i): Unfit(f"the record is {int(sizes[i])} bytes (key, value and headers before "
                          f"compression, with Kafka's framing), over the max.message.bytes of topic "
                          f"{topic!r} ({limit})", True)
            for i in np.flatnonzero(over)}


def _topic_limits(batch: pa.RecordBatch, columns: KafkaColumns, topics: pa.Array,
                  limits: SizeLimit) -> dict[int, Unfit]:
    """The rows over their topic's ``max.message.bytes`` (valid topic names only)."""
    out: dict[int, Unfit] = {}
    sizes: np.ndarray | None = None
    for topic in pc.unique(topics.drop_null()).to_pylist():
        limit = None if topic_name_problem(topic) else limits(topic)
        if limit is None:
            continue
        if sizes is None:
            sizes = record_sizes(batch, columns)
        rows = pc.fill_null(pc.equal(topics, topic), False).to_numpy(zero_copy_only=False)
        out.update(_over_limit(sizes, rows, topic, limit))
    return out


def _indices(mask: pa.Array) -> list[int]:
    """The positions where ``mask`` is true (null counts as false)."""
    return np.flatnonzero(pc.fill_null(mask, False).to_numpy(zero_copy_only=False)).tolist()


def produce_record(produce: Callable, poll: Callable, topic: str | None, value: object, key: object,
                   partition: int | None, headers: list | None) -> Unfit | None:
    """Produce one record; None, or why librdkafka refused the record itself."""
    kwargs: dict[str, object] = {}
    if partition is not None:
        kwargs["partition"] = partition
    if headers:
        kwargs["headers"] = headers
    while True:
        try:
            produce(topic, value, key, **kwargs)
            return None
        except BufferError:
            poll(0.05)
        except KafkaException as e:
            return _record_error(e)


def _record_error(e: KafkaException) -> Unfit:
    """Why librdkafka refused the record itself; re-raises any other error."""
    error = e.args[0]
    if not isinstance(error, KafkaError) or error.code() not in RECORD_ERRORS:
        raise e
    return Unfit(error.str(), error.code() == KafkaError.MSG_SIZE_TOO_LARGE)
