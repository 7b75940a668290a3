"""jetkafka's Protobuf values on real services: messages written by confluent-kafka's own
``ProtobufSerializer`` (Confluent's wire format with message indexes, schemas in a real
registry — Apicurio's Confluent-compatible API) read by ``format("jetkafka")`` with
``value.format=protobuf`` into typed columns: two writer versions read by field number with the
latest as the reader (a field removed, a field added), a pinned version, each kind of malformed
value kept as a row saying why or failing the read when asked, a stream, the event time
from a ``google.protobuf.Timestamp`` field, proto2's declared defaults, and the proto2 records
from_protobuf fails (a required field missing, a number a closed enum lacks) kept as rows saying why."""

from __future__ import annotations

import json
import struct
import uuid
from datetime import UTC, datetime

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from jetspark.errors import is_jetspark_error
from tests.integration.scripts.jetkafka_common import produce_values, read_typed, stream_rows
from tests.integration.test_jetkafka_protobuf_from_protobuf import OBSERVED, _expected
from tests.protobuf_orders import closed_file, defaults_file, message_class, order_file, serialized

pytestmark = pytest.mark.integration

V1 = order_file(with_legacy=True)
V2 = order_file(with_legacy=False, with_note=True)
Order1, Order2 = message_class(V1), message_class(V2)
Line2 = message_class(V2, "shop.Order.Line")
PLACED = datetime(2026, 1, 1, tzinfo=UTC)


def _serialized(registry: str, topic: str, message) -> bytes:
    serializer = ProtobufSerializer(type(message), SchemaRegistryClient({"url": registry}),
                                    {"use.deprecated.format": False})
    return serializer(message, SerializationContext(topic, MessageField.VALUE))


def _order(cls, **fields):
    msg = cls(**{k: v for k, v in fields.items() if k != "placed"})
    msg.placed.FromDatetime(PLACED)
    return msg


@pytest.fixture
def orders(schema_registry_url, kafka_bootstrap, kafka_topic):
    """A topic with an order written under v1, two under v2 (its subject's latest), and one
    value of each malformed kind."""
    topic = kafka_topic()
    line = Order2.Line(sku="a", n=2)
    first = _serialized(schema_registry_url, topic, _order(
        Order1, id=1, customer="ann", legacy="x", lines=[Order1.Line(sku="a", n=2)], status=1))
    second = _serialized(schema_registry_url, topic, _order(Order2, id=2, customer="bob", note="gift"))
    third = _serialized(schema_registry_url, topic, _order(
        Order2, id=3, customer="cy", lines=[line, line], tags=["x", "y"]))
    unknown_id = b"\x00" + struct.pack(">I", 999_999) + second[5:]
    other = json.dumps({"type": "record", "name": "Other", "fields": [{"name": "a", "type": "int"}]})
    avro = AvroSerializer(SchemaRegistryClient({"url": schema_registry_url}), other,
                          conf={"auto.register.schemas": True})
    avro_id = avro({"a": 1}, SerializationContext(f"{topic}-other", MessageField.VALUE))
    another_message = _serialized(schema_registry_url, topic, line)  # message indexes [0, 1]: a Line
    values = [first, second, third, b"plain text", unknown_id, avro_id, another_message, third[:-3], None]
    produce_values(kafka_bootstrap, topic, values)
    return topic


def _read(spark, bootstrap: str, topic: str, registry: str, **extra: str):
    return read_typed(spark, bootstrap, topic, registry, "protobuf", **extra)


def test_messages_of_two_writer_versions_and_each_malformed_kind(
        spark, kafka_bootstrap, schema_registry_url, orders):
    df = _read(spark, kafka_bootstrap, orders, schema_registry_url)
    fields = df.schema["value"].dataType.fieldNames()
    assert "note" in fields and "legacy" not in fields
    rows = df.orderBy("offset").select("offset", "value", "valueError").collect()
    values = [r.value.asDict(recursive=True) if r.value is not None else None for r in rows]
    placed = PLACED.replace(tzinfo=None)  # the session's time zone is UTC
    picked = [{k: v[k] for k in ("id", "customer", "note", "status", "placed", "tags", "lines")}
              for v in values[:3]]
    line = {"sku": "a", "n": 2}
    assert picked == [
        {"id": 1, "customer": "ann", "note": None, "status": "PAID", "placed": placed, "tags": [],
         "lines": [line]},
        {"id": 2, "customer": "bob", "note": "gift", "status": None, "placed": placed, "tags": [],
         "lines": []},
        {"id": 3, "customer": "cy", "note": None, "status": None, "placed": placed, "tags": ["x", "y"],
         "lines": [line, line]},
    ]
    assert values[3:] == [None] * 6
    errors = [r.valueError for r in rows]
    assert errors[:3] == [None] * 3 and errors[8] is None  # the tombstone is no error
    assert "not in Confluent's wire format" in errors[3]
    assert errors[4] == "schema id 999999 is not in the Schema Registry"
    assert errors[5].endswith("is of type AVRO, not Protobuf")
    assert errors[6].endswith("message shop.Order.Line is not the reader's shop.Order")
    assert errors[7] in ("a length out of range", "the payload ends inside a value")


def test_a_pinned_version_and_another_message_of_the_file(
        spark, kafka_bootstrap, schema_registry_url, orders):
    df = _read(spark, kafka_bootstrap, orders, schema_registry_url, **{"value.schema.version": "1"})
    assert "legacy" in df.schema["value"].dataType.fieldNames()
    rows = df.orderBy("offset").select("value.id", "value.legacy").collect()[:3]
    assert [(r.id, r.legacy) for r in rows] == [(1, "x"), (2, None), (3, None)]
    lines = _read(spark, kafka_bootstrap, orders, schema_registry_url, **{"value.message": "Order.Line"})
    assert lines.schema["value"].dataType.simpleString() == "struct<sku:string,n:int>"
    row = lines.orderBy("offset").select("value", "valueError").collect()[6]
    assert (row.value.sku, row.value.n, row.valueError) == ("a", 2, None)
    with pytest.raises(Exception, match=r"'value\.message'.*'Nope'.*no message 'Nope'"):
        _ = _read(spark, kafka_bootstrap, orders, schema_registry_url, **{"value.message": "Nope"}).schema


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


def test_plain_payloads_with_an_inline_schema(spark, kafka_bootstrap, kafka_topic):
    """Without a registry: each value is a bare message of ``value.schema``'s file."""
    topic = kafka_topic()
    produce_values(kafka_bootstrap, topic, [Order2(id=7, note="n").SerializeToString(), b"\x0f", None])
    df = (spark.read.format("jetkafka").option("kafka.bootstrap.servers", kafka_bootstrap)
          .option("subscribe", topic).option("value.format", "protobuf")
          .option("value.schema", serialized(V2)).load())
    rows = df.orderBy("offset").select("value.id", "value.note", "valueError").collect()
    assert [(r.id, r.note) for r in rows] == [(7, "n"), (None, None), (None, None)]
    assert [r.valueError for r in rows] == [None, "an invalid wire type or an unbalanced group", None]


def test_a_stream_with_the_event_time_from_a_timestamp_field(
        spark, kafka_bootstrap, schema_registry_url, orders, tmp_path):
    stream = read_typed(spark, kafka_bootstrap, orders, schema_registry_url, "protobuf", stream=True,
                        **{"eventTime.field": "placed", "eventTime.onMalformed": "null"})
    assert stream.columns[-2:] == ["eventTime", "valueError"]
    picked = stream.where("NOT heartbeat").select("offset", "value.id", "eventTime", "valueError")
    rows = stream_rows(spark, picked, str(tmp_path / "cp"))
    assert [r.id for r in rows[:3]] == [1, 2, 3]
    assert [r.eventTime for r in rows] == [PLACED.replace(tzinfo=None)] * 3 + [None] * 6
    assert [r.valueError is None for r in rows] == [True] * 3 + [False] * 5 + [True]  # the tombstone


def test_protobuf_keys_from_their_own_subject_beside_protobuf_values(
        spark, kafka_bootstrap, schema_registry_url, kafka_topic):
    """Keys written by ProtobufSerializer under ``<topic>-key`` (a Line as the key) and Order
    values under ``<topic>-value``: each column typed by its own subject, ``keyError`` first."""
    import time

    from tests.integration.scripts.jetkafka_common import produce

    topic = kafka_topic()
    client = SchemaRegistryClient({"url": schema_registry_url})
    conf = {"use.deprecated.format": False}
    keys = ProtobufSerializer(Line2, client, conf)
    values = ProtobufSerializer(Order2, client, conf)
    key_ctx = SerializationContext(topic, MessageField.KEY)
    value_ctx = SerializationContext(topic, MessageField.VALUE)
    records = [(keys(Line2(sku="k", n=1), key_ctx), values(_order(Order2, id=9), value_ctx)),
               (b"not protobuf", values(_order(Order2, id=10), value_ctx))]
    now = int(time.time() * 1000)
    produce(kafka_bootstrap, topic, [(0, k, v, now + i) for i, (k, v) in enumerate(records)])
    df = _read(spark, kafka_bootstrap, topic, schema_registry_url, **{"key.format": "protobuf",
                                                                      "key.message": "Order.Line"})
    assert df.columns[-2:] == ["keyError", "valueError"]
    rows = df.orderBy("offset").select("key", "value.id", "keyError", "valueError").collect()
    assert rows[0].key.asDict() == {"sku": "k", "n": 1} and rows[0].id == 9
    assert rows[1].key is None and "not in Confluent's wire format" in rows[1].keyError
    assert rows[1].id == 10 and [r.valueError for r in rows] == [None, None]


def test_absent_proto2_fields_read_their_declared_defaults(
        spark, kafka_bootstrap, schema_registry_url, kafka_topic):
    """proto2 ``shop.Item`` through the registry: an absent field that declares a default reads
    it (in a nested message too), one without stays null, a present one keeps its value."""
    Item = message_class(defaults_file(), "shop.Item")
    Part = type(Item().part)
    topic = kafka_topic()
    values = [Item(), Item(qty=1, label="", part=Part(note="n")), b"\x0f"]
    produce_values(kafka_bootstrap, topic, [
        v if isinstance(v, bytes) else _serialized(schema_registry_url, topic, v) for v in values])
    df = _read(spark, kafka_bootstrap, topic, schema_registry_url, **{"value.message": "Item"})
    rows = df.orderBy("offset").select("value").collect()
    # what from_protobuf gave for these records inline (tests/fixtures/from_protobuf_observed.json)
    case = next(c for c in OBSERVED["cases"] if c["name"] == "proto2-declared-defaults")
    for row, observed in zip(rows, case["observed"], strict=False):
        got = row.value.asDict(recursive=True)
        assert {k: bytes(got[k]) if isinstance(got[k], bytearray) else got[k] for k in observed} == \
            _expected(observed)
    assert rows[2].value is None  # not in Confluent's wire format: a null value, no default


def test_proto2_records_from_protobuf_fails_are_malformed_with_their_reason(
        spark, kafka_bootstrap, kafka_topic):
    """proto2 ``shop.Box`` inline: a record missing a required field, and one whose root message
    holds a number its closed enum lacks, are malformed (from_protobuf fails both), each with its
    reason; the values themselves are judged against from_protobuf's in
    tests/integration/test_jetkafka_protobuf_from_protobuf.py."""
    Writer = message_class(closed_file(writer=True), "shop.Box")
    inner = type(Writer().inner)
    topic = kafka_topic()
    produce_values(kafka_bootstrap, topic, [
        Writer(id="a", c=2, inner=inner(n=1, c=9)).SerializeToString(), Writer(c=2).SerializeToString(),
        Writer(id="b", c=9).SerializeToString()])
    df = (spark.read.format("jetkafka").option("kafka.bootstrap.servers", kafka_bootstrap)
          .option("subscribe", topic).option("value.format", "protobuf")
          .option("value.schema", serialized(closed_file())).load())
    rows = df.orderBy("offset").select("value", "valueError").collect()
    assert [r.valueError for r in rows] == [
        None, "a required field is missing",
        "a field of the message holds what its type cannot (another wire type, or a number its enum does not "
        "define)"]
