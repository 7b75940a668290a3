"""jetkafka's JSON Schema values on real services: documents written by confluent-kafka's own
``JSONSerializer`` (Confluent's wire format, schemas in a real registry — Apicurio's
Confluent-compatible API) read by ``format("jetkafka")`` with ``value.format=json-schema`` into
typed columns: two writer versions read by field name with the latest as the reader (a field
added, a field removed), and each kind of malformed value kept as a row saying why, or failing
the read when asked."""

from __future__ import annotations

import json
import struct
import uuid
from datetime import datetime

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from jetspark.errors import is_jetspark_error
from tests.integration.scripts.jetkafka_common import produce_values, read_typed, stream_rows

pytestmark = pytest.mark.integration

LINE = {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}}
V1 = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
      "properties": {"id": {"type": "integer"}, "customer": {"type": "string"}, "legacy": {"type": "string"},
                     "placed": {"type": "string", "format": "date-time"},
                     "lines": {"type": "array", "items": {"$ref": "#/definitions/Line"}}},
      "definitions": {"Line": LINE}}
V2 = {**V1, "properties": {**{k: v for k, v in V1["properties"].items() if k != "legacy"},
                           "note": {"oneOf": [{"type": "null"}, {"type": "string"}]}}}
PLACED = "2026-01-01T00:00:00Z"


def _serialized(registry: str, topic: str, schema: dict, document: dict) -> bytes:
    client = SchemaRegistryClient({"url": registry})
    serializer = JSONSerializer(json.dumps(schema), client, conf={"auto.register.schemas": True})
    return serializer(document, SerializationContext(topic, MessageField.VALUE))


@pytest.fixture
def orders(schema_registry_url, kafka_bootstrap, kafka_topic):
    """A topic with an order written under v1, two under v2 (its subject's latest), and one
    value of each malformed kind."""
    topic = kafka_topic()
    line = {"sku": "a", "qty": 2}
    first = _serialized(schema_registry_url, topic, V1, {
        "id": 1, "customer": "ann", "legacy": "x", "placed": PLACED, "lines": [line]})
    second = _serialized(schema_registry_url, topic, V2, {
        "id": 2, "customer": "bob", "placed": PLACED, "lines": [], "note": "gift"})
    third = _serialized(schema_registry_url, topic, V2, {
        "id": 3, "customer": "cy", "placed": PLACED, "lines": [line, line], "note": None})
    unknown_id = b"\x00" + struct.pack(">I", 999_999) + second[5:]
    other = json.dumps({"type": "record", "name": "Other", "fields": [{"name": "a", "type": "int"}]})
    avro = AvroSerializer(SchemaRegistryClient({"url": schema_registry_url}), other,
                          conf={"auto.register.schemas": True})
    avro_id = avro({"a": 1}, SerializationContext(f"{topic}-other", MessageField.VALUE))
    wrong_type = second[:5] + b'{"id": "two"}'
    values = [first, second, third, b"plain text", unknown_id, avro_id, wrong_type, third[:-3], None]
    produce_values(kafka_bootstrap, topic, values)
    return topic


def _read(spark, bootstrap: str, topic: str, registry: str, **extra: str):
    return read_typed(spark, bootstrap, topic, registry, "json-schema", **extra)


def test_documents_of_two_writer_versions_and_each_malformed_kind(
        spark, kafka_bootstrap, schema_registry_url, orders):
    df = _read(spark, kafka_bootstrap, orders, schema_registry_url)
    assert df.schema["value"].dataType.fieldNames() == ["id", "customer", "placed", "lines", "note"]
    rows = df.orderBy("offset").select("offset", "value", "valueError").collect()
    values = [r.value.asDict(recursive=True) if r.value is not None else None for r in rows]
    placed = datetime(2026, 1, 1)  # the session's time zone is UTC
    line = {"sku": "a", "qty": 2}
    assert values[:3] == [
        {"id": 1, "customer": "ann", "placed": placed, "lines": [line], "note": None},
        {"id": 2, "customer": "bob", "placed": placed, "lines": [], "note": "gift"},
        {"id": 3, "customer": "cy", "placed": placed, "lines": [line, line], "note": None},
    ]
    assert values[3:] == [None] * 6
    errors = [r.valueError for r in rows]
    assert errors[:3] == [None] * 3 and errors[8] is None  # the tombstone is no error
    assert "not in Confluent's wire format" in errors[3]
    assert errors[4] == "schema id 999999 is not in the Schema Registry"
    assert errors[5].endswith("is of type AVRO, not JSON Schema")
    assert errors[6].startswith("does not fit the schema") and "/id" in errors[6]
    assert errors[7].startswith("does not fit the schema")


def test_a_pinned_version_reads_with_that_schema(spark, kafka_bootstrap, schema_registry_url, orders):
    df = _read(spark, kafka_bootstrap, orders, schema_registry_url, **{"value.schema.version": "1"})
    assert df.schema["value"].dataType.fieldNames() == ["id", "customer", "legacy", "placed", "lines"]
    rows = df.orderBy("offset").select("value.id", "value.legacy").collect()[:3]
    assert [(r.id, r.legacy) for r in rows] == [(1, "x"), (2, None), (3, None)]


def test_fail_names_the_first_malformed_record(spark, kafka_bootstrap, schema_registry_url, orders):
    df = _read(spark, kafka_bootstrap, orders, schema_registry_url, **{"value.onMalformed": "fail"})
    with pytest.raises(Exception) as caught:
        df.collect()
    assert is_jetspark_error(caught.value)
    assert f"{orders} partition 0 offset 3 did not decode" in str(caught.value)


def test_a_subject_holding_another_format_is_refused_when_planned(
        spark, kafka_bootstrap, schema_registry_url):
    topic = f"avro_only_{uuid.uuid4().hex[:8]}"
    SchemaRegistryClient({"url": schema_registry_url}).register_schema(f"{topic}-value", Schema(json.dumps(
        {"type": "record", "name": "A", "fields": [{"name": "a", "type": "int"}]}), "AVRO"))
    refused = r"'value\.format'.*accepted: avro \(the subject .* holds a schema of type AVRO\)"
    with pytest.raises(Exception, match=refused):
        _read(spark, kafka_bootstrap, topic, schema_registry_url).schema  # noqa: B018 (planning)


def test_a_stream_reads_typed_documents(spark, kafka_bootstrap, schema_registry_url, orders, tmp_path):
    stream = read_typed(spark, kafka_bootstrap, orders, schema_registry_url, "json-schema", stream=True)
    rows = stream_rows(spark, stream.select("offset", "value.id", "value.note", "valueError"),
                       str(tmp_path / "cp"))
    assert [(r.id, r.note) for r in rows[:3]] == [(1, None), (2, "gift"), (3, None)]
    assert [r.valueError is None for r in rows] == [True] * 3 + [False] * 5 + [True]
