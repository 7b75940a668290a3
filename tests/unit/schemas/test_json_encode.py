"""The sink's JSON encoder: random rows of a schema with every type written, encoded a column at a
time, parse as JSON into the rows (nulls left out, timestamps and dates in ISO 8601) and validate
against their JSON Schema (jsonschema, what confluent-kafka's JSONSerializer checks); rows that
do not fit, and types that do not fit, refused with the field named."""

from __future__ import annotations

import json
import math
from datetime import UTC, date, datetime, timedelta

import jsonschema
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

from jetspark.schemas.avro_program import _arrow
from jetspark.schemas.json_encode import json_encoder
from jetspark.schemas.json_schema_types import JsonSchemaError

SCHEMA = {
    "type": "object", "required": ["id"],
    "properties": {
        "id": {"type": "integer"}, "name": {"type": ["string", "null"]}, "score": {"type": "number"},
        "at": {"type": "string", "format": "date-time"}, "day": {"type": "string", "format": "date"},
        "ok": {"type": "boolean"}, "kind": {"type": "string", "enum": ["WEB", "SHOP"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "maybe": {"type": "array", "items": {"oneOf": [{"type": "null"}, {"type": "integer"}]}},
        "address": {"$ref": "#/definitions/Address"},
    },
    "definitions": {"Address": {"type": "object", "properties": {
        "street": {"type": "string"}, "zip": {"type": "integer"}}}},
}
SPARK = T.StructType([
    T.StructField("id", T.LongType()), T.StructField("name", T.StringType()),
    T.StructField("score", T.DoubleType()), T.StructField("at", T.TimestampType()),
    T.StructField("day", T.DateType()), T.StructField("ok", T.BooleanType()),
    T.StructField("kind", T.StringType()), T.StructField("tags", T.ArrayType(T.StringType(), False)),
    T.StructField("maybe", T.ArrayType(T.IntegerType())),
    T.StructField("address", T.StructType([T.StructField("street", T.StringType()),
                                           T.StructField("zip", T.IntegerType())]))])
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_text = st.text(max_size=8)
_rows = st.fixed_dictionaries({"id": st.integers(-(2**63), 2**63 - 1)}, optional={
    "name": st.none() | _text, "score": st.floats(allow_nan=False, allow_infinity=False),
    "at": st.integers(-(2**45), 2**45).map(lambda us: EPOCH + timedelta(microseconds=us)),
    "day": st.dates(min_value=date(1, 1, 1)), "ok": st.booleans(), "kind": st.sampled_from(["WEB", "SHOP"]),
    "tags": st.lists(_text, max_size=3), "maybe": st.lists(st.none() | st.integers(-(2**31), 2**31 - 1),
                                                            max_size=3),
    "address": st.none() | st.fixed_dictionaries({}, optional={"street": _text,
                                                                "zip": st.integers(0, 99999)}),
})


def _expected(row: dict) -> dict:
    out = {}
    for name, value in row.items():
        if value is None:
            continue
        if name == "at":
            value = value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        elif name == "day":
            value = value.isoformat()
        elif name == "address":
            value = {k: v for k, v in value.items() if v is not None}
        out[name] = value
    return out


@settings(max_examples=80, deadline=None)
@given(st.lists(st.none() | _rows, max_size=8), st.integers(0, 2))
def test_random_rows_parse_back_and_validate_against_their_schema(rows, cut):
    payloads, unfit = json_encoder(json.dumps(SCHEMA), SPARK).encode(pa.array(rows, _arrow(SPARK))[cut:])
    assert unfit == {}
    for row, payload in zip(rows[cut:], payloads.to_pylist(), strict=True):
        if row is None:
            assert payload is None
            continue
        document = json.loads(payload)
        jsonschema.validate(document, SCHEMA)
        expected = _expected(row)
        if "score" in expected:  # Arrow prints the shortest text that reads back as the double
            assert math.isclose(document.pop("score"), expected.pop("score"), rel_tol=0, abs_tol=0)
        assert document == expected


def test_strings_are_escaped():
    spark = T.StructType([T.StructField("id", T.LongType()), T.StructField("name", T.StringType())])
    text = 'quote " backslash \\ newline \n bell \x07 é'
    payloads, _ = json_encoder(json.dumps(SCHEMA), spark).encode(pa.array([{"id": 1, "name": text}],
                                                                          _arrow(spark)))
    assert json.loads(payloads[0].as_py())["name"] == text


def test_rows_that_do_not_fit_say_why():
    rows = [{"id": 1, "kind": "WEB"}, {"id": None}, {"id": 2, "kind": "POST"}, {"id": 3, "tags": ["a", None]},
            {"id": 4, "score": float("nan")}]
    spark = T.StructType([*(f for f in SPARK.fields if f.name != "tags"),
                          T.StructField("tags", T.ArrayType(T.StringType(), True))])
    payloads, unfit = json_encoder(json.dumps(SCHEMA), spark).encode(pa.array(rows, _arrow(spark)))
    assert unfit == {1: "value.id is null; the schema requires it",
                     2: "value.kind is 'POST', not one of the schema's enum",
                     3: "value.tags[] holds a null; the schema's items are not nullable",
                     4: "value.score is nan, which JSON has no number for"}
    assert json.loads(payloads[0].as_py()) == {"id": 1, "kind": "WEB"}


@pytest.mark.parametrize("spark, message", [
    (T.StructType([T.StructField("id", T.LongType()), T.StructField("coupon", T.StringType())]),
     "value has field(s) 'coupon' that the schema's properties lack (they would be lost)"),
    (T.StructType([T.StructField("name", T.StringType())]),
     "value has no field 'id', which the schema requires"),
    (T.StructType([T.StructField("id", T.StringType())]),
     "value.id is string, which does not fit the schema's integer"),
])
def test_a_type_that_does_not_fit_is_refused_naming_the_field(spark, message):
    with pytest.raises(JsonSchemaError) as e:
        json_encoder(json.dumps(SCHEMA), spark)
    assert message in str(e.value)
