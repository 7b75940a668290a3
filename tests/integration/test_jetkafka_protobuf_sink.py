"""jetkafka's sink writing Protobuf on real services: a DataFrame's struct encoded as a message of
a schema in a real registry (Apicurio's Confluent-compatible API), registered by confluent-kafka's
own ``ProtobufSerializer``, and read back by confluent-kafka's ``ProtobufDeserializer``: message
indexes of a nested message, a row that does not fit kept as a dead letter, and no registering."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark_jetkafka import DefaultSource

from tests.integration.scripts.sink_kafka_read import read_topic
from tests.protobuf_orders import message_class, order_file

pytestmark = pytest.mark.integration

FILE = order_file(with_legacy=False, with_note=True)
Order, Line = message_class(FILE), message_class(FILE, "shop.Order.Line")
PLACED = datetime(2026, 1, 1, 12, 30, tzinfo=UTC)


def _registered(registry: str, topic: str) -> None:
    """The subject's schema as confluent-kafka's serializer registers it."""
    serializer = ProtobufSerializer(Order, SchemaRegistryClient({"url": registry}),
                                    {"use.deprecated.format": False})
    serializer(Order(id=0), SerializationContext(topic, MessageField.VALUE))


def _read_back(registry: str, topic: str, records, cls=Order) -> list:
    deserializer = ProtobufDeserializer(cls, {"use.deprecated.format": False})
    return [deserializer(r[1], SerializationContext(topic, MessageField.VALUE)) for r in records]


def test_structs_are_written_as_messages_and_read_back_by_confluent_kafka(
        spark, kafka_bootstrap, schema_registry_url, kafka_topic):
    spark.dataSource.register(DefaultSource)
    topic, dead = kafka_topic(), kafka_topic()
    _registered(schema_registry_url, topic)
    df = spark.createDataFrame(
        [(i, f"c{i}", "SHIPPED" if i != 2 else "LOST", PLACED, [(f"s{i}", i)], {"gift": ("g", 1)}, [i, -i])
         for i in range(4)],
        "id long, customer string, status string, placed timestamp, "
        "lines array<struct<sku: string, n: int>>, attrs map<string, struct<sku: string, n: int>>, "
        "counts array<int>")
    (df.write.format("jetkafka").option("kafka.bootstrap.servers", kafka_bootstrap).option("topic", topic)
     .option("value.format", "protobuf").option("schemaRegistry.url", schema_registry_url)
     .option("deadLetterTopic", dead).mode("append").save())
    records = read_topic(kafka_bootstrap, topic)
    orders = sorted(_read_back(schema_registry_url, topic, records), key=lambda m: m.id)
    assert [m.id for m in orders] == [0, 1, 3]
    third = orders[2]
    assert (third.customer, third.status, list(third.counts)) == ("c3", 2, [3, -3])  # SHIPPED is 2
    assert third.placed.ToDatetime(tzinfo=UTC) == PLACED
    assert [(line.sku, line.n) for line in third.lines] == [("s3", 3)] and third.attrs["gift"].sku == "g"
    [(_key, letter, _partition, headers)] = read_topic(kafka_bootstrap, dead)
    assert json.loads(letter)["id"] == 2
    assert dict(headers)["jetspark.rejected.reason"].decode().endswith(
        "value.status is 'LOST', not a value of enum shop.Status")


def test_a_nested_message_carries_its_indexes_and_registering_is_refused(
        spark, kafka_bootstrap, schema_registry_url, kafka_topic):
    spark.dataSource.register(DefaultSource)
    topic = kafka_topic()
    _registered(schema_registry_url, topic)
    lines = spark.createDataFrame([("a", 1), ("b", 2)], "sku string, n int")

    def writer(**options):
        return (lines.write.format("jetkafka").option("kafka.bootstrap.servers", kafka_bootstrap)
                .option("topic", topic).option("value.format", "protobuf")
                .option("schemaRegistry.url", schema_registry_url).options(**options).mode("append"))

    with pytest.raises(Exception) as e:
        writer(**{"value.message": "Order.Line", "value.schema.register": "true"}).save()
    assert "value.schema.register" in str(e.value)
    writer(**{"value.message": "Order.Line"}).save()
    records = read_topic(kafka_bootstrap, topic)
    assert {r[1][5:8] for r in records} == {bytes([4, 0, 2])}  # message indexes [0, 1]
    assert sorted((m.sku, m.n) for m in _read_back(schema_registry_url, topic, records, Line)) == [
        ("a", 1), ("b", 2)]
