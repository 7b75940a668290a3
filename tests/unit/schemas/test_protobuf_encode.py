"""The sink's Protobuf encoder against Google's protobuf runtime: random messages, read into
Spark's values by jetspark's decoder, are encoded back a column at a time and parsed by
protobuf into the same messages; rows that do not fit, and types that do not fit, refused with
the field named; Confluent's message indexes of a nested message."""

from __future__ import annotations

import base64

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

from jetspark.schemas import protobuf_types as pt
from jetspark.schemas.avro_program import _arrow
from jetspark.schemas.protobuf_encode import protobuf_encoder
from jetspark.schemas.protobuf_types import ProtobufSchemaError
from tests.unit.schemas.test_protobuf_decode import ORDER, Order, build, decoded, orders, reader

FILE = pt.load_file(base64.b64encode(ORDER.SerializeToString()).decode(), lambda _n: None)
FILE_SET = pt.file_set(FILE)
SPARK = pt.spark_type(pt.message(FILE, "shop.Order"))


def _encoder(spark: T.DataType = SPARK, name: str = "shop.Order"):
    return protobuf_encoder(FILE_SET, name, spark)


@settings(max_examples=100, deadline=None)
@given(st.lists(orders, min_size=1, max_size=6), st.integers(0, 2))
def test_random_messages_read_and_written_back_are_the_same_messages(values, cut):
    messages = [build(v) for v in values]
    rows, errors = decoded(reader(ORDER), [m.SerializeToString() for m in messages])
    assert not errors.any()
    array = pa.array(rows, _arrow(SPARK))[cut:]  # a slice: the encoder honours Arrow's offsets
    payloads, unfit = _encoder().encode(array)
    assert unfit == {}
    assert [Order.FromString(p) for p in payloads.to_pylist()] == messages[cut:]


def test_nulls_are_absent_fields_and_a_null_value_stays_null():
    rows = [{"id": 5, "customer": None, "tags": ["a"], "maybe": 0}, None]
    payloads, unfit = _encoder().encode(pa.array(rows, _arrow(SPARK)))
    assert unfit == {} and payloads[1].as_py() is None
    msg = Order.FromString(payloads[0].as_py())
    assert msg.id == 5 and not msg.customer and list(msg.tags) == ["a"]
    assert msg.HasField("maybe") and msg.maybe == 0  # a proto3 optional set to 0 is present


def test_rows_that_do_not_fit_say_why():
    spark = T.StructType([T.StructField("status", T.StringType()), T.StructField("qty", T.LongType()),
                          T.StructField("counts", T.ArrayType(T.IntegerType(), containsNull=True))])
    rows = [{"status": "PAID", "qty": 1, "counts": [1]}, {"status": "LOST", "qty": 1, "counts": []},
            {"status": "NEW", "qty": 2**31, "counts": []},
            {"status": None, "qty": None, "counts": [1, None]}]
    payloads, unfit = _encoder(spark).encode(pa.array(rows, _arrow(spark)))
    assert unfit == {1: "value.status is 'LOST', not a value of enum shop.Status",
                     2: "value.qty is 2147483648, outside the range of int32",
                     3: "value.counts[] holds a null; a repeated field holds none"}
    first = Order.FromString(payloads[0].as_py())
    assert (first.status, first.qty, list(first.counts)) == (1, 1, [1])  # PAID is 1


@pytest.mark.parametrize("spark, message", [
    (T.StructType([T.StructField("id", T.LongType()), T.StructField("coupon", T.StringType())]),
     "value has field(s) 'coupon' that message shop.Order lacks (they would be lost)"),
    (T.StructType([T.StructField("id", T.StringType())]),
     "value.id is string, which does not fit the message's field id (int64)"),
    (T.StructType([T.StructField("placed", T.LongType())]),
     "value.placed is bigint, which does not fit the message's field placed (google.protobuf.Timestamp)"),
])
def test_a_type_that_does_not_fit_is_refused_naming_the_field(spark, message):
    with pytest.raises(ProtobufSchemaError) as e:
        _encoder(spark)
    assert message in str(e.value)


def test_message_indexes_of_the_first_and_a_nested_message():
    assert _encoder().indexes() == b"\x00"
    line = T.StructType([T.StructField("sku", T.StringType())])
    assert _encoder(line, "shop.Order.Line").indexes() == bytes([4, 0, 2])  # [0, 1] zig-zag, count first
