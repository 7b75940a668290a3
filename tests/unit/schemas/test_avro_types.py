"""Avro schemas as Spark types, as Spark's ``from_avro`` types them (spark-avro's rules)."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import types as T

from jetspark.schemas.avro_types import AvroSchemaError, record_name, spark_type

ORDER = {
    "type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": ["null", "double"]}},
        {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
            {"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "int"]}]}},
        {"name": "billing", "type": ["null", "Address"]},
        {"name": "previous", "type": ["null", "shop.Status"]},
        {"name": "digest", "type": {"type": "fixed", "name": "Md5", "size": 16}},
        {"name": "amount", "type": ["int", "long"]},
        {"name": "either", "type": ["null", "string", "long"]},
    ]}


def test_a_realistic_record_gets_from_avros_types():
    data_type, nullable = spark_type(json.dumps(ORDER))
    address = T.StructType([T.StructField("city", T.StringType(), False),
                            T.StructField("zip", T.IntegerType(), True)])
    assert not nullable
    assert data_type == T.StructType([
        T.StructField("id", T.LongType(), False),
        T.StructField("note", T.StringType(), True),
        T.StructField("ts", T.TimestampType(), False),
        T.StructField("local", T.TimestampNTZType(), False),
        T.StructField("day", T.DateType(), False),
        T.StructField("price", T.DecimalType(9, 2), False),
        T.StructField("status", T.StringType(), False),
        T.StructField("tags", T.ArrayType(T.StringType(), False), False),
        T.StructField("attrs", T.MapType(T.StringType(), T.DoubleType(), True), False),
        T.StructField("address", address, False),
        T.StructField("billing", address, True),
        T.StructField("previous", T.StringType(), True),
        T.StructField("digest", T.BinaryType(), False),
        T.StructField("amount", T.LongType(), False),
        T.StructField("either", T.StructType([T.StructField("member0", T.StringType(), True),
                                              T.StructField("member1", T.LongType(), True)]), True),
    ])


@pytest.mark.parametrize(("schema", "expected"), [
    ('"string"', (T.StringType(), False)),
    ("string", (T.StringType(), False)),
    ('["null", "double"]', (T.DoubleType(), True)),
    ('{"type": "float"}', (T.FloatType(), False)),
])
def test_primitive_and_union_schemas(schema, expected):
    assert spark_type(schema) == expected


def test_a_recursive_schema_is_refused_by_name():
    node = {"type": "record", "name": "Node", "fields": [
        {"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(AvroSchemaError, match="Node contains itself"):
        spark_type(node)


def test_an_undefined_name_and_text_that_is_no_schema_are_refused():
    with pytest.raises(AvroSchemaError, match="does not define"):
        spark_type({"type": "record", "name": "R", "fields": [{"name": "a", "type": "Missing"}]})
    with pytest.raises(AvroSchemaError, match="not JSON"):
        spark_type("{not json")


def test_record_name_is_the_full_name():
    assert record_name(ORDER) == "shop.Order"
    assert record_name({"type": "record", "name": "a.b.C", "namespace": "x", "fields": []}) == "a.b.C"
    assert record_name('"string"') is None


def test_types_given_as_objects_and_unions_merged_by_their_avro_types():
    record = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": {"type": ["null", "string"]}},
        {"name": "b", "type": ["long", {"type": "int", "logicalType": "date"}]},
        {"name": "c", "type": ["float", "double", "null"]}]}
    assert spark_type(record)[0] == T.StructType([
        T.StructField("a", T.StringType(), True), T.StructField("b", T.LongType(), False),
        T.StructField("c", T.DoubleType(), True)])


@pytest.mark.parametrize("decimal", [
    {"type": "bytes", "logicalType": "decimal", "precision": 3, "scale": 5},  # scale > precision
    {"type": "fixed", "name": "F", "size": 2, "logicalType": "decimal", "precision": 10},  # too small
    {"type": "bytes", "logicalType": "decimal"},  # no precision
])
def test_an_invalid_decimal_is_read_as_its_plain_bytes_as_avro_drops_it(decimal):
    assert spark_type(decimal) == (T.BinaryType(), False)


def test_a_decimal_wider_than_sparks_is_refused():
    with pytest.raises(AvroSchemaError, match="precision at most 38"):
        spark_type({"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2})
    with pytest.raises(AvroSchemaError, match="not an Avro schema"):
        spark_type({"type": "array"})  # no items
