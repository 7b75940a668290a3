"""The rows of the jetkafka source: Spark's Kafka columns, then — when the query asks for event
time (``marks``, :func:`jetspark.datasources.watermark_options.asks_for_event_time`) — the column
contract (:mod:`jetspark.columns`), then ``eventTime`` when it comes from the payload."""

from __future__ import annotations

import functools

import pyarrow as pa
from pyspark.sql import types as T

from jetspark.columns import HEARTBEAT, LATE, TIMESTAMP_TYPE, WATERMARK, WATERMARK_DDL, WATERMARK_FIELDS
from jetspark.datasources.kafka.native import HEADERS_TYPE
from jetspark.errors import OptionError

_BASE_FIELDS = [
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
    ("offset", pa.int64()), ("timestamp", TIMESTAMP_TYPE), ("timestampType", pa.int32()),
]


@functools.cache
def arrow_schema(include_headers: bool, event_time: bool = False, marks: bool = True) -> pa.Schema:
    fields = list(_BASE_FIELDS)
    if include_headers:
        fields.append(("headers", HEADERS_TYPE))
    if marks:
        fields += WATERMARK_FIELDS
    if event_time:
        fields.append(("eventTime", TIMESTAMP_TYPE))
    return pa.schema(fields)


def spark_schema(include_headers: bool, event_time: bool = False, marks: bool = True) -> str:
    """The DDL of the source's rows: Spark's Kafka columns, then (``marks``) watermark, heartbeat,
    late (and ``eventTime`` when it comes from the payload, ``eventTime.field``)."""
    cols = ["key binary", "value binary", "topic string", "partition int", "offset bigint",
            "timestamp timestamp", "timestampType int"]
    if include_headers:
        cols.append("headers array<struct<key:string,value:binary>>")
    extra = ["eventTime timestamp"] if event_time else []
    return ", ".join([*cols, *([WATERMARK_DDL] if marks else []), *extra])


def typed_spark_schema(include_headers: bool, typed: list, event_time: bool = False,
                       marks: bool = True) -> T.StructType:
    """The source's Spark schema with the typed columns (:class:`TypedValues`, key first)
    of their reader schemas' types, ``eventTime`` when it comes from a field, and the error
    columns (``keyError``, ``valueError``) last."""
    types = {t.column: t.spark for t in typed}
    fields = [T.StructField("key", types.get("key", T.BinaryType())),
              T.StructField("value", types.get("value", T.BinaryType())),
              T.StructField("topic", T.StringType()), T.StructField("partition", T.IntegerType()),
              T.StructField("offset", T.LongType()), T.StructField("timestamp", T.TimestampType()),
              T.StructField("timestampType", T.IntegerType())]
    if include_headers:
        header = T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())])
        fields.append(T.StructField("headers", T.ArrayType(header)))
    if marks:
        fields += [T.StructField(WATERMARK, T.TimestampType()), T.StructField(HEARTBEAT, T.BooleanType()),
                   T.StructField(LATE, T.BooleanType())]
    if event_time:
        fields.append(T.StructField("eventTime", T.TimestampType()))
    fields += [T.StructField(t.error_column, T.StringType()) for t in typed]
    for t in typed:
        if t.flatten:  # the struct's fields take the column's place, null where the value is
            at = [f.name for f in fields].index(t.column)
            fields[at:at + 1] = [T.StructField(f.name, f.dataType, True) for f in t.spark.fields]
    names = [f.name.lower() for f in fields]
    clashes = sorted({n for n in names if names.count(n) > 1})
    if clashes:
        flattened = " and ".join(f"{t.column}.flatten" for t in typed if t.flatten)
        raise OptionError(flattened, "true", f"false: the flattened field(s) {', '.join(clashes)} would "
                          "share a name with another column (select them from the struct instead)")
    return T.StructType(fields)


def heartbeat_batch(include_headers: bool, watermark: int | None, event_time: bool = False) -> pa.RecordBatch:
    """One row without payload: ``heartbeat`` true, carrying W so Spark sees it advance."""
    schema = arrow_schema(include_headers, event_time)
    arrays = [pa.nulls(1, f.type) for f in schema]
    arrays[schema.get_field_index(WATERMARK)] = pa.array([to_us(watermark)], TIMESTAMP_TYPE)
    arrays[schema.get_field_index(HEARTBEAT)] = pa.array([True])
    arrays[schema.get_field_index(LATE)] = pa.array([False])
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def to_us(ms: int | None) -> int | None:
    """Epoch ms → epoch µs (None stays None)."""
    return None if ms is None else ms * 1000
