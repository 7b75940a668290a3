"""jetkafka's typed values without a registry: plain Avro with the schema given inline (what
Spark's ``from_avro`` reads with a fixed schema), the options that ask for it, and what a value
that does not decode gets."""

from __future__ import annotations

import io
import json

import fastavro
import pyarrow as pa
import pytest
from pyspark.sql import types as T

from jetspark.datasources.kafka.options import KafkaSourceOptions
from jetspark.datasources.kafka.typed_values import MalformedValueError
from jetspark.errors import OptionError

SCHEMA = {"type": "record", "name": "Click", "fields": [
    {"name": "user", "type": "string"}, {"name": "n", "type": ["null", "int"], "default": None}]}
BASE = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "clicks"}


def _options(**extra: str) -> KafkaSourceOptions:
    return KafkaSourceOptions.parse({**BASE, **extra}, streaming=True)


def _avro(record: dict) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(SCHEMA), record)
    return buf.getvalue()


def test_bytes_is_the_default_and_value_options_need_a_format():
    assert _options().typed_values is None
    with pytest.raises(OptionError, match=r"nothing unless value\.format is avro"):
        _options(**{"value.schema": json.dumps(SCHEMA)})
    with pytest.raises(OptionError, match=r"unless schemaRegistry\.url or value\.schema"):
        _options(**{"value.format": "avro"})
    with pytest.raises(OptionError, match=r"one of bytes \| avro \| protobuf \| json-schema"):
        _options(**{"value.format": "xml"})
    with pytest.raises(OptionError, match=r"'value\.message'.*nothing unless value\.format is protobuf"):
        _options(**{"value.format": "avro", "value.schema": json.dumps(SCHEMA), "value.message": "A"})


def test_an_inline_schema_types_the_value_column():
    typed = _options(**{"value.format": "avro", "value.schema": json.dumps(SCHEMA)}).typed_values
    assert typed.spark == T.StructType([T.StructField("user", T.StringType(), False),
                                        T.StructField("n", T.IntegerType(), True)])
    assert typed.registry is None and typed.on_malformed == "null"


def test_an_inline_schema_that_is_not_avro_is_refused_by_name():
    with pytest.raises(OptionError, match=r"value\.schema.*an Avro schema Spark can type: .*not JSON"):
        _options(**{"value.format": "avro", "value.schema": "{nope"})


def test_values_decode_and_those_that_do_not_say_why():
    typed = _options(**{"value.format": "avro", "value.schema": json.dumps(SCHEMA)}).typed_values
    values = pa.array([_avro({"user": "a", "n": 1}), None, b"\x09", _avro({"user": "b", "n": None})])
    decoded, errors = typed.decode_values(values)
    assert decoded.to_pylist() == [{"user": "a", "n": 1}, None, None, {"user": "b", "n": None}]
    assert errors.to_pylist() == [None, None, "a length or item count out of range", None]


def test_fail_names_the_record():
    typed = _options(**{"value.format": "avro", "value.schema": json.dumps(SCHEMA),
                        "value.onMalformed": "fail"}).typed_values
    batch = pa.RecordBatch.from_pydict({"value": pa.array([_avro({"user": "a", "n": 1}), b"\x01"]),
                                        "topic": ["clicks"] * 2, "partition": [3, 3], "offset": [10, 11]})
    with pytest.raises(MalformedValueError, match="the value of clicks partition 3 offset 11 did not decode"):
        typed.decode_batch(batch)


CLICK_JSON = {"type": "object", "properties": {"user": {"type": "string"}, "n": {"type": "integer"}}}


def test_json_schema_values_read_plain_json_documents_by_field_name():
    typed = _options(**{"value.format": "json-schema", "value.schema": json.dumps(CLICK_JSON)}).typed_values
    assert typed.spark == T.StructType([T.StructField("user", T.StringType(), True),
                                        T.StructField("n", T.LongType(), True)])
    values = pa.array([b'{"n": 1, "user": "a", "extra": true}', None, b'{"n": "one"}', b'{"user": "b"}'])
    decoded, errors = typed.decode_values(values)
    assert decoded.to_pylist() == [{"user": "a", "n": 1}, None, None, {"user": "b", "n": None}]
    reasons = [e and e.split(":")[0] for e in errors.to_pylist()]
    assert reasons == [None, None, "does not fit the schema", None]


def test_a_json_schema_spark_cannot_type_is_refused_by_name():
    with pytest.raises(OptionError, match=r"value\.schema.*a JSON Schema Spark can type: .*maps"):
        _options(**{"value.format": "json-schema", "value.schema": json.dumps(
            {"type": "object", "additionalProperties": {"type": "string"}})})


def test_keys_are_typed_by_their_own_options_and_say_why_in_key_error():
    options = _options(**{"key.format": "json-schema", "key.schema": json.dumps(CLICK_JSON),
                          "value.format": "avro", "value.schema": json.dumps(SCHEMA)})
    keys, values = options.typed_keys, options.typed_values
    assert [t.column for t in options.typed] == ["key", "value"]
    assert (keys.fmt, keys.error_column, values.fmt, values.error_column) == (
        "json-schema", "keyError", "avro", "valueError")
    batch = pa.RecordBatch.from_pydict({
        "key": pa.array([b'{"user": "k"}', b"[]"]),
        "value": pa.array([_avro({"user": "a", "n": 1}), b"\x01"]),
        "topic": ["clicks"] * 2, "partition": [0, 0], "offset": [0, 1]})
    for typed in options.typed:
        batch = typed.decode_batch(batch)
    assert batch.schema.names == ["key", "value", "topic", "partition", "offset", "keyError", "valueError"]
    assert batch.column("key").to_pylist() == [{"user": "k", "n": None}, None]
    assert batch.column("value").to_pylist() == [{"user": "a", "n": 1}, None]
    assert batch.column("keyError")[0].as_py() is None and "array" in batch.column("keyError")[1].as_py()
    assert batch.column("valueError").to_pylist()[0] is None


def test_key_options_need_a_key_format_and_name_their_option():
    with pytest.raises(OptionError, match=r"'key\.schema'.*nothing unless key\.format is avro, protobuf"):
        _options(**{"key.schema": json.dumps(SCHEMA)})
    with pytest.raises(OptionError, match=r"'key\.format'.*unless schemaRegistry\.url or key\.schema"):
        _options(**{"key.format": "avro"})


EVENT = {"type": "record", "name": "Seen", "fields": [
    {"name": "meta", "type": {"type": "record", "name": "Meta", "fields": [
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "secs", "type": "double"}, {"name": "text", "type": "string"},
        {"name": "flag", "type": "boolean"}]}}]}


def _seen(at_ms: int, secs: float, text: str) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(EVENT),
                               {"meta": {"at": at_ms, "secs": secs, "text": text, "flag": True}})
    return buf.getvalue()


@pytest.mark.parametrize(("field", "fmt", "expected_us"), [
    ("meta.at", None, 1_767_225_600_123_000),          # a timestamp is the event time as it is
    ("meta.secs", "epochSeconds", 1_767_225_601_500_000),
    ("meta.text", "iso8601", 1_767_225_602_000_000),
])
def test_event_time_from_a_typed_field(field, fmt, expected_us):
    from jetspark.datasources.kafka.event_time import extract_us

    extra = {"eventTime.field": field, **({"eventTime.format": fmt} if fmt else {})}
    options = _options(**{"value.format": "avro", "value.schema": json.dumps(EVENT), **extra})
    values = pa.array([_seen(1_767_225_600_123, 1_767_225_601.5, "2026-01-01T00:00:02Z"), b"\x02", None])
    assert extract_us(options.event_time, values).to_pylist() == [expected_us, None, None]
    # the batch decoded after the event time takes the remembered decoding of the same column
    typed = options.typed_values
    assert typed.decode_values(values)[0].to_pylist()[0]["meta"]["text"] == "2026-01-01T00:00:02Z"


@pytest.mark.parametrize(("field", "says"), [
    ("meta.gone", r"'eventTime\.field'.*meta has at, secs, text, flag"),
    ("meta.flag", r"a field holding a timestamp, date, number or string \(this one is boolean\)"),
    ("meta.at.x", r"meta\.at has no fields"),
])
def test_an_event_time_field_the_reader_schema_cannot_give_is_refused(field, says):
    with pytest.raises(OptionError, match=says):
        _options(**{"value.format": "avro", "value.schema": json.dumps(EVENT), "eventTime.field": field})


def test_a_flattened_value_puts_its_fields_in_the_columns_place():
    from jetspark.datasources.kafka.schema import typed_spark_schema

    def flattened(schema: object) -> KafkaSourceOptions:
        return _options(**{"value.format": "avro", "value.schema": json.dumps(schema),
                           "value.flatten": "true"})

    options = flattened(SCHEMA)
    names = typed_spark_schema(False, list(options.typed)).fieldNames()
    assert names[:4] == ["key", "user", "n", "topic"] and names[-1] == "valueError"
    batch = pa.RecordBatch.from_pydict({
        "key": pa.array([None, None], pa.binary()),
        "value": pa.array([_avro({"user": "a", "n": 1}), b"\x01"]), "topic": ["clicks"] * 2})
    batch = options.typed_values.decode_batch(batch)
    assert batch.schema.names == ["key", "user", "n", "topic", "valueError"]
    assert batch.column("user").to_pylist() == ["a", None] and batch.column("n").to_pylist() == [1, None]
    clashing = {**SCHEMA, "fields": [*SCHEMA["fields"], {"name": "offset", "type": "long"}]}
    with pytest.raises(OptionError, match=r"'value\.flatten'.*offset would share a name with another column"):
        typed_spark_schema(False, list(flattened(clashing).typed))
    with pytest.raises(OptionError, match=r"'value\.flatten'.*has no fields"):
        flattened("string")
