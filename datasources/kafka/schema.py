"""The rows of the jetkafka source: Spark's Kafka columns, then the column contract
(:mod:`jetspark.columns`), then ``eventTime`` when it comes from the payload."""

from __future__ import annotations

import functools

import pyarrow as pa
from pyspark.sql import types as T

from jetspark.columns import HEARTBEAT, LATE, TIMESTAMP_TYPE, WATERMARK, WATERMARK_DDL, WATERMARK_FIELDS
from jetspark.datasources.kafka.native import HEADERS_TYPE

VALUE_ERROR = "valueError"
"""Why a typed value did not decode (``value.format``; null when it did)."""

_BASE_FIELDS = [
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
    ("offset", pa.int64()), ("timestamp", TIMESTAMP_TYPE), ("timestampType", pa.int32()),
]


@functools.cache
def arrow_schema(include_headers: bool, event_time: bool = False) -> pa.Schema:
    fields = list(_BASE_FIELDS)
    if include_headers:
        fields.append(("headers", HEADERS_TYPE))
    fields += WATERMARK_FIELDS
    if event_time:
        fields.append(("eventTime", TIMESTAMP_TYPE))
    return pa.schema(fields)


def spark_schema(include_headers: bool, event_time: bool = False) -> str:
    """The DDL of the source's rows: Spark's Kafka columns, then watermark, heartbeat, late
    (and ``eventTime`` when it comes from the payload, ``eventTime.field``)."""
    cols = ["key binary", "value binary", "topic string", "partition int", "offset bigint",
            "timestamp timestamp", "timestampType int"]
    if include_headers:
        cols.append("headers array<struct<key:string,value:binary>>")
    extra = ["eventTime timestamp"] if event_time else []
    return ", ".join([*cols, WATERMARK_DDL, *extra])


def typed_arrow_schema(base: pa.Schema, value_type: pa.DataType) -> pa.Schema:
    """The source's Arrow schema with ``value`` of ``value_type`` and ``valueError`` last."""
    schema = base.set(base.get_field_index("value"), pa.field("value", value_type))
    return schema.append(pa.field(VALUE_ERROR, pa.string()))


def typed_spark_schema(include_headers: bool, value_type: T.DataType) -> T.StructType:
    """The source's Spark schema with a typed ``value`` and ``valueError`` last."""
    fields = [T.StructField("key", T.BinaryType()), T.StructField("value", value_type),
              T.StructField("topic", T.StringType()), T.StructField("partition", T.IntegerType()),
              T.StructField("offset", T.LongType()), T.StructField("timestamp", T.TimestampType()),
              T.StructField("timestampType", T.IntegerType())]
    if include_headers:
        header = T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())])
        fields.append(T.StructField("headers", T.ArrayType(header)))
    fields += [T.StructField(WATERMARK, T.TimestampType()), T.StructField(HEARTBEAT, T.BooleanType()),
               T.StructField(LATE, T.BooleanType()), T.StructField(VALUE_ERROR, T.StringType())]
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
