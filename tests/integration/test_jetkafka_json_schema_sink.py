"""jetkafka's sink writing JSON Schema documents on real services: a DataFrame's struct written
with the subject's schema in a real registry (Apicurio's Confluent-compatible API) and read back
by confluent-kafka's ``JSONDeserializer``, which validates every document against it, and by the
jetkafka source; an inline schema registered only when asked; a row that does not fit kept as a
dead letter."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark_jetkafka import DefaultSource

from tests.integration.scripts.jetkafka_common import read_typed
from tests.integration.scripts.sink_kafka_read import read_topic

pytestmark = pytest.mark.integration

ORDER = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
         "required": ["id", "customer"],
         "properties": {"id": {"type": "integer"}, "customer": {"type": "string"},
                        "placed": {"type": "string", "format": "date-time"},
                        "lines": {"type": "array", "items": {"$ref": "#/definitions/Line"}},
                        "note": {"oneOf": [{"type": "null"}, {"type": "string"}]}},
         "definitions": {"Line": {"type": "object", "properties": {"sku": {"type": "string"},
                                                                  "qty": {"type": "integer"}}}}}
PLACED = datetime(2026, 1, 1, 12, 30, tzinfo=UTC)
ROWS = "id long, customer string, placed timestamp, lines array<struct<sku: string, qty: int>>, note string"


def test_documents_are_written_with_the_subjects_schema_and_read_back(
        spark, kafka_bootstrap, schema_registry_url, kafka_topic):
    spark.dataSource.register(DefaultSource)
    topic, dead = kafka_topic(), kafka_topic()
    schema_id = SchemaRegistryClient({"url": schema_registry_url}).register_schema(
        f"{topic}-value", Schema(json.dumps(ORDER), "JSON"))
    df = spark.createDataFrame(
        [(i, None if i == 2 else f"c{i}", PLACED, [("s", i)], None if i % 2 else "gift") for i in range(4)],
        ROWS)
    (df.write.format("jetkafka").option("kafka.bootstrap.servers", kafka_bootstrap).option("topic", topic)
     .option("value.format", "json-schema").option("schemaRegistry.url", schema_registry_url)
     .option("deadLetterTopic", dead).mode("append").save())
    records = read_topic(kafka_bootstrap, topic)
    assert {r[1][1:5] for r in records} == {schema_id.to_bytes(4, "big")}
    deserializer = JSONDeserializer(json.dumps(ORDER))  # validates each document against the schema
    context = SerializationContext(topic, MessageField.VALUE)
    documents = sorted((deserializer(r[1], context) for r in records), key=lambda d: d["id"])
    assert documents[0] == {"id": 0, "customer": "c0", "placed": "2026-01-01T12:30:00.000000Z",
                            "lines": [{"sku": "s", "qty": 0}], "note": "gift"}
    assert [d["id"] for d in documents] == [0, 1, 3] and "note" not in documents[1]  # a null is left out
    back = read_typed(spark, kafka_bootstrap, topic, schema_registry_url, "json-schema").select("value.*")
    assert sorted(r["id"] for r in back.collect()) == [0, 1, 3]
    [(_key, letter, _partition, headers)] = read_topic(kafka_bootstrap, dead)
    assert json.loads(letter)["id"] == 2
    assert dict(headers)["jetspark.rejected.reason"].decode().endswith(
        "value.customer is null; the schema requires it")


def test_an_inline_schema_is_registered_only_when_asked(spark, kafka_bootstrap, schema_registry_url,
                                                        kafka_topic):
    spark.dataSource.register(DefaultSource)
    topic = kafka_topic()
    df = spark.createDataFrame([(1, "ann", PLACED, [], None)], ROWS)

    def write(**options):
        (df.write.format("jetkafka").option("kafka.bootstrap.servers", kafka_bootstrap).option("topic", topic)
         .option("value.format", "json-schema").option("schemaRegistry.url", schema_registry_url)
         .option("value.schema", json.dumps(ORDER)).options(**options).mode("append").save())

    with pytest.raises(Exception) as e:
        write()
    assert "value.schema.register" in str(e.value)
    write(**{"value.schema.register": "true"})
    latest = SchemaRegistryClient({"url": schema_registry_url}).get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "JSON" and json.loads(latest.schema.schema_str)["title"] == "Order"
    [record] = read_topic(kafka_bootstrap, topic)
    assert json.loads(record[1][5:]) == {
        "id": 1, "customer": "ann", "placed": "2026-01-01T12:30:00.000000Z", "lines": []}
