"""The sink's Avro encoder against fastavro (a real client's Avro): random rows of a schema with
every type the encoder writes, encoded a column at a time and read back by fastavro; rows that
do not fit, and types that do not fit, refused with the field named."""

from __future__ import annotations

import io
import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

from jetspark.schemas.avro_encode import avro_encoder, schema_of, schema_text_of
from jetspark.schemas.avro_program import _arrow, compile_program, decode_values
from jetspark.schemas.avro_types import AvroSchemaError, spark_type

LINE = {"type": "record", "name": "Line", "fields": [
    {"name": "sku", "type": "string"}, {"name": "qty", "type": ["null", "int"], "default": None}]}
SCHEMA = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "small", "type": "int"},
    {"name": "name", "type": "string"},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "score", "type": "double"},
    {"name": "ratio", "type": "float"},
    {"name": "flag", "type": "boolean"},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["WEB", "SHOP", "APP"]}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
    {"name": "big", "type": {"type": "fixed", "name": "Big", "size": 9, "logicalType": "decimal",
                             "precision": 20, "scale": 0}},
    {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 3}},
    {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "blob", "type": "bytes"},
    {"name": "tags", "type": {"type": "map", "values": "int"}},
    {"name": "lines", "type": {"type": "array", "items": LINE}},
    {"name": "either", "type": ["null", "int", "string"], "default": None},
    {"name": "channel", "type": "string", "default": "web"},  # no column: its default
]}
TEXT = json.dumps(SCHEMA)
SPARK = T.StructType([f for f in spark_type(SCHEMA)[0].fields if f.name != "channel"])
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_ints = st.integers(-(2**63), 2**63 - 1)
_int32 = st.integers(-(2**31), 2**31 - 1)
_text = st.text(max_size=12)
_micros = st.integers(-(2**50), 2**50)
_rows = st.fixed_dictionaries({
    "id": _ints, "small": _int32, "name": _text, "note": st.none() | _text,
    "score": st.floats(allow_nan=False), "ratio": st.floats(width=32, allow_nan=False), "flag": st.booleans(),
    "kind": st.sampled_from(["WEB", "SHOP", "APP"]),
    "price": st.integers(-(10**12) + 1, 10**12 - 1).map(lambda u: Decimal(u).scaleb(-2)),
    "big": st.integers(-(10**20) + 1, 10**20 - 1).map(Decimal),
    "code": st.binary(min_size=3, max_size=3),
    "placed": _micros, "at": _micros, "day": st.integers(-700_000, 700_000),
    "blob": st.binary(max_size=10),
    "tags": st.dictionaries(_text, _int32, max_size=3).map(lambda d: list(d.items())),
    "lines": st.lists(st.fixed_dictionaries({"sku": _text, "qty": st.none() | _int32}), max_size=3),
    "either": st.one_of(st.none(), _int32.map(lambda i: {"member0": i, "member1": None}),
                        _text.map(lambda s: {"member0": None, "member1": s})),
})


GOOD = {"id": -(2**40), "small": 7, "name": "ann", "note": None, "score": -0.5, "ratio": 1.5, "flag": True,
        "kind": "SHOP", "price": Decimal("-12.34"), "big": Decimal(-(10**19)), "code": b"abc",
        "placed": 1_767_225_600_123_456, "at": -1, "day": 20_000, "blob": b"\x00\xff",
        "tags": [("a", 1), ("b", -2)], "lines": [{"sku": "x", "qty": None}, {"sku": "y", "qty": 3}],
        "either": {"member0": None, "member1": "s"}}


def _arrow_rows(rows: list[dict]) -> pa.Array:
    shown = [None if r is None else {
        **r, "placed": EPOCH + timedelta(microseconds=r["placed"]),
        "at": EPOCH + timedelta(microseconds=r["at"]),
        "day": date(1970, 1, 1) + timedelta(days=r["day"])} for r in rows]
    return pa.array(shown, _arrow(SPARK))


def _expected(row: dict) -> dict:
    """What fastavro reads back for ``row``."""
    placed_ms = row["placed"] // 1000  # a timestamp-millis keeps whole milliseconds, floored
    either = row["either"]
    return {
        **row, "ratio": float(np.float32(row["ratio"])), "tags": dict(row["tags"]),
        "placed": EPOCH + timedelta(milliseconds=placed_ms), "at": EPOCH + timedelta(microseconds=row["at"]),
        "day": date(1970, 1, 1) + timedelta(days=row["day"]),
        "either": None if either is None else either["member0"] if either["member0"] is not None
        else either["member1"],
        "channel": "web",
    }


def _read(payload: bytes) -> dict:
    return fastavro.schemaless_reader(io.BytesIO(payload), fastavro.parse_schema(SCHEMA))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.none() | _rows, max_size=8), st.integers(0, 3))
def test_random_rows_read_back_by_fastavro(rows, cut):
    array = _arrow_rows(rows)[cut:]  # a slice: the encoder honours Arrow's offsets
    rows = rows[cut:]
    payloads, unfit = avro_encoder(TEXT, SPARK).encode(array)
    assert unfit == {}
    for row, payload in zip(rows, payloads.to_pylist(), strict=True):
        if row is None:
            assert payload is None  # a null value stays null: a tombstone
        else:
            assert _read(payload) == _expected(row)


def test_jetspark_reads_back_what_it_writes():
    program = compile_program(TEXT)
    row = GOOD
    payloads, _ = avro_encoder(TEXT, SPARK).encode(_arrow_rows([row]))
    decoded, errors = decode_values(program, payloads)
    assert errors.tolist() == [0]
    assert decoded.to_pylist()[0]["lines"] == row["lines"] and decoded.to_pylist()[0]["channel"] == "web"


def _one_unfit(**change) -> str:
    row, good = {**GOOD, **change}, GOOD
    payloads, unfit = avro_encoder(TEXT, SPARK).encode(_arrow_rows([good, row, good]))
    assert set(unfit) == {1}
    assert _read(payloads[0].as_py()) == _read(payloads[2].as_py()) == _expected(good)
    return unfit[1]


def test_rows_that_do_not_fit_say_why_and_the_others_are_written():
    assert _one_unfit(name=None) == "value.name is null; the schema's string is not nullable"
    assert _one_unfit(kind="POST") == "value.kind is 'POST', not a symbol of enum shop.Kind (WEB, SHOP, APP)"
    assert _one_unfit(code=b"abcd") == "value.code is 4 bytes; fixed shop.Code holds 3"
    assert _one_unfit(lines=[{"sku": None, "qty": 1}]) == ("value.lines[].sku is null; the schema's string "
                                                           "is not nullable")
    assert _one_unfit(either={"member0": 1, "member1": "x"}) == ("value.either sets members 0, 1 of a "
                                                                  "union; one at most")


def test_a_long_column_into_an_int_field_is_checked_per_row():
    schema = json.dumps({"type": "record", "name": "R", "fields": [{"name": "n", "type": "int"}]})
    spark = T.StructType([T.StructField("n", T.LongType())])
    payloads, unfit = avro_encoder(schema, spark).encode(pa.array([{"n": 5}, {"n": 2**31}], _arrow(spark)))
    assert unfit == {1: "value.n is 2147483648, outside the range of Avro's int"}
    assert fastavro.schemaless_reader(io.BytesIO(payloads[0].as_py()), json.loads(schema)) == {"n": 5}


def test_a_struct_null_under_a_nullable_union_hides_its_fields():
    """A null record in ``["null", record]`` is written as null: its fields (null too, as Arrow
    gives them) are not checked against their non-nullable types."""
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "inner", "type": ["null", {"type": "record", "name": "I", "fields": [
            {"name": "s", "type": "string"}]}]}]}
    spark = spark_type(schema)[0]
    payloads, unfit = avro_encoder(json.dumps(schema), spark).encode(
        pa.array([{"inner": None}, {"inner": {"s": "x"}}], _arrow(spark)))
    assert unfit == {}
    assert [fastavro.schemaless_reader(io.BytesIO(p), schema) for p in payloads.to_pylist()] == [
        {"inner": None}, {"inner": {"s": "x"}}]


@pytest.mark.parametrize("spark, message", [
    (T.StructType([f for f in SPARK.fields if f.name != "name"]),
     "value has no field 'name', and the schema's record shop.Order gives it no default"),
    (T.StructType([*SPARK.fields, T.StructField("extra", T.StringType())]),
     "value has field(s) 'extra' that the schema's record shop.Order lacks (they would be lost)"),
    (T.StructType([T.StructField(f.name, T.StringType()) if f.name == "id" else f for f in SPARK.fields]),
     "value.id is string, which does not fit the schema's long"),
    (T.StructType([T.StructField(f.name, T.DecimalType(12, 3)) if f.name == "price" else f
                   for f in SPARK.fields]),
     "value.price is decimal(12,3), which does not fit the schema's bytes (decimal); accepted: decimal "
     "with scale 2"),
])
def test_a_type_that_does_not_fit_is_refused_naming_the_field(spark, message):
    with pytest.raises(AvroSchemaError) as e:
        avro_encoder(TEXT, spark)
    assert message in str(e.value)


def test_the_schema_of_a_spark_type_reads_back_as_that_type():
    spark = T.StructType([
        T.StructField("id", T.LongType(), False), T.StructField("name", T.StringType()),
        T.StructField("at", T.TimestampType()), T.StructField("n", T.ShortType(), False),
        T.StructField("tags", T.ArrayType(T.StringType(), False)),
        T.StructField("inner", T.StructType([T.StructField("x", T.DoubleType())])),
        T.StructField("m", T.MapType(T.StringType(), T.DecimalType(5, 1)))])
    schema = schema_of(spark)
    assert schema["fields"][1] == {"name": "name", "type": ["null", "string"], "default": None}
    assert schema["fields"][5]["type"][1]["namespace"] == "topLevelRecord"
    back = spark_type(schema)[0]
    assert [f.name for f in back.fields] == [f.name for f in spark.fields]
    assert back["n"].dataType == T.IntegerType() and back["tags"].dataType == spark["tags"].dataType
    row = {"id": 1, "name": None, "at": EPOCH, "n": 3, "tags": ["a"], "inner": {"x": 0.5},
           "m": [("k", Decimal("1.5"))]}
    payloads, unfit = avro_encoder(schema_text_of(spark), spark).encode(pa.array([row], _arrow(spark)))
    assert unfit == {}
    assert fastavro.schemaless_reader(io.BytesIO(payloads[0].as_py()), schema) == {
        **row, "m": {"k": Decimal("1.5")}}
