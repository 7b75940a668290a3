"""JSON Schema → Spark types: what ``value.format=json-schema`` gives each construct, and the
constructs it refuses, naming where they are."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from jetspark.schemas.json_schema_types import JsonSchemaError, spark_type


def _field(name: str, t: T.DataType) -> T.StructField:
    return T.StructField(name, t, True)


def test_each_construct_has_the_type_a_spark_user_expects():
    schema = {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "amount": {"type": "number"},
            "paid": {"type": "boolean"},
            "name": {"type": ["string", "null"]},
            "placed": {"type": "string", "format": "date-time"},
            "due": {"type": "string", "format": "date"},
            "status": {"enum": ["NEW", "PAID"]},
            "version": {"const": 2},
            "note": {"oneOf": [{"type": "null", "title": "Not included"}, {"type": "string"}]},
            "address": {"$ref": "#/definitions/Address"},
            "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}},
        },
        "definitions": {"Address": {"type": "object", "properties": {"city": {"type": "string"}}}},
        "$defs": {"Line": {"properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}}},
    }
    assert spark_type(schema) == T.StructType([
        _field("id", T.LongType()), _field("amount", T.DoubleType()), _field("paid", T.BooleanType()),
        _field("name", T.StringType()), _field("placed", T.TimestampType()), _field("due", T.DateType()),
        _field("status", T.StringType()), _field("version", T.LongType()), _field("note", T.StringType()),
        _field("address", T.StructType([_field("city", T.StringType())])),
        _field("lines", T.ArrayType(T.StructType([_field("sku", T.StringType()),
                                                  _field("qty", T.LongType())]), True)),
    ])


@pytest.mark.parametrize(("schema", "says"), [
    ({"type": "string"}, "root of a value's schema must be an object"),
    ({"type": "object", "properties": {"a": {"type": ["string", "integer"]}}},
     r"\$\.a: one type besides null"),
    ({"type": "object", "properties": {"a": {"allOf": [{"type": "string"}]}}}, r"\$\.a: allOf"),
    ({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}},
     "oneOf is supported for one schema and null only"),
    ({"type": "object", "properties": {"a": {}}}, r"\$\.a: a field without one type"),
    ({"type": "object", "properties": {"a": {"type": "object", "additionalProperties": {"type": "string"}}}},
     "maps"),
    ({"type": "object", "properties": {"a": {"$ref": "other.json#/x"}}}, "only #/definitions/"),
    ({"type": "object", "properties": {"a": {"$ref": "#/definitions/Node"}},
      "definitions": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/definitions/Node"}}}}},
     "recursive"),
    ({"type": "object", "properties": {"a": {"$ref": "#/definitions/Gone"}}}, "names nothing"),
    ({"type": "object", "properties": {"a": {"type": "array"}}}, "one schema for its items"),
])
def test_what_spark_cannot_type_is_refused_naming_the_place(schema, says):
    with pytest.raises(JsonSchemaError, match=says):
        spark_type(schema)


def test_text_that_is_not_a_schema_is_refused():
    with pytest.raises(JsonSchemaError, match="not JSON"):
        spark_type("{nope")
    with pytest.raises(JsonSchemaError, match="a JSON Schema is a JSON object"):
        spark_type("[1]")
