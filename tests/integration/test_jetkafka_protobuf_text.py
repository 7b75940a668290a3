"""jetkafka's Protobuf values whose schemas the registry holds as ``.proto`` text (as Java's
serializers register them; Apicurio serves text even when asked for the serialized form): the
text and its reference, also text, are compiled with protoc when the query is planned and on the
read tasks, and the records — payloads written by Google's runtime from descriptors built apart
from jetspark — read into typed columns; a record of the file's other message is malformed."""

from __future__ import annotations

import struct

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tests.integration.scripts.jetkafka_common import produce_values, read_typed

pytestmark = pytest.mark.integration

MONEY = """syntax = "proto3";
package shop.common;
// what an order costs
message Money { int64 cents = 1; string currency = 2; }
"""
ORDER = """syntax = "proto3";
package shop;
import "common/money.proto";
import "google/protobuf/timestamp.proto";
message Order {
  string id = 1;
  shop.common.Money total = 2;
  repeated string tags = 3;
  google.protobuf.Timestamp placed = 4;
}
message Refund { int32 reason = 1; }
"""


def _classes():
    """Order and Refund as Google's runtime builds them from descriptors written by hand (the
    same messages as the texts), not from jetspark's compilation."""
    F = descriptor_pb2.FieldDescriptorProto
    pool = descriptor_pool.DescriptorPool()
    from google.protobuf import timestamp_pb2

    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    money = descriptor_pb2.FileDescriptorProto(name="common/money.proto", package="shop.common",
                                               syntax="proto3")
    m = money.message_type.add(name="Money")
    m.field.add(name="cents", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    m.field.add(name="currency", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    pool.Add(money)
    order = descriptor_pb2.FileDescriptorProto(
        name="order.proto", package="shop", syntax="proto3",
        dependency=["common/money.proto", "google/protobuf/timestamp.proto"])
    o = order.message_type.add(name="Order")
    o.field.add(name="id", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    o.field.add(name="total", number=2, type=F.TYPE_MESSAGE, type_name=".shop.common.Money",
                label=F.LABEL_OPTIONAL)
    o.field.add(name="tags", number=3, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    o.field.add(name="placed", number=4, type=F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp",
                label=F.LABEL_OPTIONAL)
    order.message_type.add(name="Refund").field.add(name="reason", number=1, type=F.TYPE_INT32,
                                                    label=F.LABEL_OPTIONAL)
    pool.Add(order)
    return (message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order")),
            message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Refund")))


def test_text_schemas_with_a_text_reference_are_compiled_and_read(
        spark, kafka_bootstrap, schema_registry_url, kafka_topic):
    topic = kafka_topic()
    client = SchemaRegistryClient({"url": schema_registry_url})
    client.register_schema(f"{topic}-money", Schema(MONEY, "PROTOBUF"))
    schema_id = client.register_schema(f"{topic}-value", Schema(
        ORDER, "PROTOBUF", references=[SchemaReference("common/money.proto", f"{topic}-money", 1)]))
    served = client.get_schema(schema_id)
    assert "message Order" in served.schema_str  # the registry holds and serves text
    Order, Refund = _classes()
    first = Order(id="a", tags=["x", "y"])
    first.total.cents, first.total.currency = 150, "EUR"
    first.placed.FromSeconds(1_767_225_600)  # 2026-01-01
    header = b"\x00" + struct.pack(">I", schema_id)
    values = [header + b"\x00" + first.SerializeToString(),
              header + b"\x00" + Order(id="b").SerializeToString(),
              header + b"\x02\x02" + Refund(reason=3).SerializeToString()]  # message indexes [1]
    produce_values(kafka_bootstrap, topic, values)

    df = read_typed(spark, kafka_bootstrap, topic, schema_registry_url, "protobuf")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:string,total:struct<cents:bigint,currency:string>,tags:array<string>,placed:timestamp>")
    rows = df.orderBy("offset").select("value", "valueError").collect()
    got = [r.value.asDict(recursive=True) if r.value is not None else None for r in rows]
    assert got[0]["id"] == "a" and got[0]["total"] == {"cents": 150, "currency": "EUR"}
    assert got[0]["tags"] == ["x", "y"] and got[0]["placed"].isoformat() == "2026-01-01T00:00:00"
    assert got[1] == {"id": "b", "total": None, "tags": [], "placed": None}
    assert [r.valueError is None for r in rows] == [True, True, False]
    assert got[2] is None and "shop.Refund" in rows[2].valueError
