"""jetkafka's sink writing Avro on real services: a DataFrame's struct (or its columns) encoded
with a schema of a real registry (Apicurio's Confluent-compatible API) and read back by
confluent-kafka's own ``AvroDeserializer``; the subject's latest or a pinned version, keys of
their own subject, registering only when asked, and a row that does not fit the schema kept as a
dead letter, never written as garbage."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark_jetkafka import DefaultSource

from jetspark.errors import is_jetspark_error
from tests.integration.scripts.sink_kafka_read import read_topic

pytestmark = pytest.mark.integration

V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": "string"},
    {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "channel", "type": "string", "default": "web"},
                       {"name": "note", "type": ["null", "string"], "default": None}]}
KEY = {"type": "record", "name": "OrderKey", "namespace": "shop", "fields": [{"name": "id", "type": "long"}]}
PLACED = datetime(2026, 1, 1, 12, 30, tzinfo=UTC)
ORDER = ("struct<id: bigint, customer: string, placed: timestamp, "
         "lines: array<struct<sku: string, qty: int>>, channel: string, note: string>")


@pytest.fixture
def jetkafka(spark):
    spark.dataSource.register(DefaultSource)
    return spark


def _register(registry: str, subject: str, schema: dict) -> int:
    client = SchemaRegistryClient({"url": registry})
    return client.register_schema(subject, Schema(json.dumps(schema), "AVRO"))


def _decoded(registry: str, topic: str, records, field=MessageField.VALUE) -> list:
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry}))
    at = 1 if field == MessageField.VALUE else 0
    return [deserializer(r[at], SerializationContext(topic, field)) for r in records]


def _writer(df, bootstrap: str, registry: str, topic: str, **options: str):
    return (df.write.format("jetkafka").option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic).option("value.format", "avro").option("schemaRegistry.url", registry)
            .options(**options).mode("append"))


def test_structs_are_written_with_the_latest_version_and_read_back_by_confluent_kafka(
        jetkafka, kafka_bootstrap, schema_registry_url, kafka_topic):
    """Keys of their own subject, values of the subject's latest version (v2); a row whose
    value does not fit (a null customer) goes to the dead-letter topic as JSON, saying why."""
    topic, dead = kafka_topic(partitions=2), kafka_topic()
    _register(schema_registry_url, f"{topic}-value", V1)
    v2_id = _register(schema_registry_url, f"{topic}-value", V2)
    _register(schema_registry_url, f"{topic}-key", KEY)
    df = jetkafka.createDataFrame([
        ((i,), (i, None if i == 3 else f"c{i}", PLACED, [(f"s{i}", i)] * (i % 3), "shop",
                None if i % 2 else "gift")) for i in range(6)], f"key struct<id: bigint>, value {ORDER}")
    _writer(df, kafka_bootstrap, schema_registry_url, topic, **{
        "key.format": "avro", "deadLetterTopic": dead}).save()
    records = read_topic(kafka_bootstrap, topic)
    assert {r[1][1:5] for r in records} == {v2_id.to_bytes(4, "big")}  # the latest version's id
    values = sorted(_decoded(schema_registry_url, topic, records), key=lambda v: v["id"])
    assert [v["id"] for v in values] == [0, 1, 2, 4, 5]
    assert values[2] == {"id": 2, "customer": "c2", "placed": PLACED, "lines": [{"sku": "s2", "qty": 2}] * 2,
                         "channel": "shop", "note": "gift"}
    keys = _decoded(schema_registry_url, topic, records, MessageField.KEY)
    assert sorted(k["id"] for k in keys) == [0, 1, 2, 4, 5]
    [(_key, letter, _partition, headers)] = read_topic(kafka_bootstrap, dead)
    assert json.loads(letter)["id"] == 3 and json.loads(letter)["customer"] is None
    reason = dict(headers)["jetspark.rejected.reason"].decode()
    assert reason == (f"its value does not fit the Avro schema (subject {topic}-value version 2 "
                      f"(id {v2_id})): value.customer is null; the schema's string is not nullable")


def test_a_pinned_version_writes_an_older_schema_and_a_column_it_lacks_is_refused(
        jetkafka, kafka_bootstrap, schema_registry_url, kafka_topic):
    topic = kafka_topic()
    v1_id = _register(schema_registry_url, f"{topic}-value", V1)
    _register(schema_registry_url, f"{topic}-value", V2)
    df = jetkafka.createDataFrame([(1, "ann", PLACED, [])], "id long, customer string, placed timestamp, "
                                  "lines array<struct<sku: string, qty: int>>")
    _writer(df, kafka_bootstrap, schema_registry_url, topic, **{"value.schema.version": "1"}).save()
    [record] = read_topic(kafka_bootstrap, topic)
    assert record[1][1:5] == v1_id.to_bytes(4, "big")
    assert _decoded(schema_registry_url, topic, [record]) == [
        {"id": 1, "customer": "ann", "placed": PLACED, "lines": []}]
    with pytest.raises(Exception) as e:
        _writer(df.selectExpr("*", "'x' AS coupon"), kafka_bootstrap, schema_registry_url, topic).save()
    assert is_jetspark_error(e.value)
    assert "field(s) 'coupon' that the schema's record shop.Order lacks (they would be lost)" in str(e.value)


def test_a_schema_is_registered_only_when_asked(jetkafka, kafka_bootstrap, schema_registry_url, kafka_topic):
    """Without a value column the row's columns are the value; the schema of their Spark type is
    registered with value.schema.register=true, and only then."""
    topic = kafka_topic()
    df = jetkafka.createDataFrame([(1, "ann", None), (2, "bob", 2.5)],
                                  "id long not null, name string, score double")
    with pytest.raises(Exception) as e:
        _writer(df, kafka_bootstrap, schema_registry_url, topic).save()
    assert "value.schema.register" in str(e.value) and f"{topic}-value" in str(e.value)
    _writer(df, kafka_bootstrap, schema_registry_url, topic, **{"value.schema.register": "true"}).save()
    latest = SchemaRegistryClient({"url": schema_registry_url}).get_latest_version(f"{topic}-value")
    assert json.loads(latest.schema.schema_str)["fields"][1] == {
        "name": "name", "type": ["null", "string"], "default": None}
    values = _decoded(schema_registry_url, topic, read_topic(kafka_bootstrap, topic))
    assert sorted(values, key=lambda v: v["id"]) == [{"id": 1, "name": "ann", "score": None},
                                                     {"id": 2, "name": "bob", "score": 2.5}]


def test_a_stream_copies_typed_values_with_an_inline_schema(
        jetkafka, kafka_bootstrap, schema_registry_url, kafka_topic, tmp_path):
    """Avro in, Avro out: a stream reads typed values and writes them with an inline schema, which
    must be the subject's already (looked up, not registered); the copy reads back the same."""
    source, target = kafka_topic(), kafka_topic()
    _register(schema_registry_url, f"{source}-value", V2)
    orders = jetkafka.createDataFrame(
        [((i, f"c{i}", PLACED, [("s", i)], "web", None),) for i in range(5)], f"value {ORDER}")
    _writer(orders, kafka_bootstrap, schema_registry_url, source).save()
    stream = (jetkafka.readStream.format("jetkafka").option("kafka.bootstrap.servers", kafka_bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest")
              .option("value.format", "avro").option("schemaRegistry.url", schema_registry_url).load()
              .select("value"))

    def start():
        return (stream.writeStream.format("jetkafka").option("kafka.bootstrap.servers", kafka_bootstrap)
                .option("topic", target).option("value.format", "avro").option("value.schema", json.dumps(V2))
                .option("schemaRegistry.url", schema_registry_url)
                .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())

    with pytest.raises(Exception) as e:
        start().awaitTermination()
    assert "value.schema.register" in str(e.value) and "does not hold the schema" in str(e.value)
    target_id = _register(schema_registry_url, f"{target}-value", V2)
    start().awaitTermination()
    records = read_topic(kafka_bootstrap, target)
    assert {r[1][1:5] for r in records} == {target_id.to_bytes(4, "big")}
    assert sorted(_decoded(schema_registry_url, target, records), key=lambda v: v["id"]) == sorted(
        _decoded(schema_registry_url, source, read_topic(kafka_bootstrap, source)), key=lambda v: v["id"])
