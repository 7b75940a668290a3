"""The Schema Registry service (Apicurio Registry's Confluent-compatible API) with confluent-kafka's
own client and serializers: schemas registered, records framed in Confluent's wire format
(magic byte 0, a 4-byte big-endian schema id, the encoded record), schemas read back by id and
by subject, compatibility enforced. Test data for typed records is made exactly so."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.schema_registry_client import ConfigCompatibilityLevel, ServerConfig
from confluent_kafka.serialization import MessageField, SerializationContext

from jetspark.devtools.services import schema_registry
from jetspark.devtools.services.process import free_port
from jetspark.errors import ServiceError

pytestmark = pytest.mark.integration

USER_V1 = {
    "type": "record", "name": "User", "namespace": "jetspark.test",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
}
# compatible (BACKWARD): a field added with a default
USER_V2 = {**USER_V1, "fields": [*USER_V1["fields"],
                                 {"name": "email", "type": ["null", "string"], "default": None}]}
# incompatible: a field added without a default
USER_BAD = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "zip", "type": "string"}]}


def _topic() -> str:
    return f"jet_sr_{uuid.uuid4().hex[:10]}"


def _framing(payload: bytes) -> int:
    """The schema id of a record in Confluent's wire format."""
    assert payload[0] == 0, f"magic byte {payload[0]}, not 0"
    assert len(payload) > 5
    return int.from_bytes(payload[1:5], "big")


def test_avro_schema_registered_framed_read_back_and_evolved(schema_registry_url: str) -> None:
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from fastavro import parse_schema, schemaless_reader

    topic = _topic()
    subject = f"{topic}-value"
    ctx = SerializationContext(topic, MessageField.VALUE)
    client = SchemaRegistryClient({"url": schema_registry_url})
    record = {"name": "ada", "age": 36}

    payload = AvroSerializer(client, json.dumps(USER_V1))(record, ctx)  # registers the schema
    schema_id = _framing(payload)
    assert schemaless_reader(io.BytesIO(payload[5:]), parse_schema(USER_V1)) == record
    assert AvroDeserializer(client)(payload, ctx) == record

    by_id = client.get_schema(schema_id)
    assert by_id.schema_type == "AVRO" and json.loads(by_id.schema_str) == USER_V1
    # a new client each time: confluent-kafka caches the latest version of a subject
    latest = SchemaRegistryClient({"url": schema_registry_url}).get_latest_version(subject)
    assert (latest.subject, latest.version, latest.schema_id) == (subject, 1, schema_id)
    assert json.loads(latest.schema.schema_str) == USER_V1

    client.set_config(subject, ServerConfig(compatibility=ConfigCompatibilityLevel.BACKWARD))
    assert client.test_compatibility(subject, Schema(json.dumps(USER_V2), "AVRO"))
    assert not client.test_compatibility(subject, Schema(json.dumps(USER_BAD), "AVRO"))
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(json.dumps(USER_BAD), "AVRO"))
    assert refused.value.http_status_code == 409

    v2_id = client.register_schema(subject, Schema(json.dumps(USER_V2), "AVRO"))
    assert v2_id != schema_id
    assert client.get_versions(subject) == [1, 2]
    latest = SchemaRegistryClient({"url": schema_registry_url}).get_latest_version(subject)
    assert (latest.version, latest.schema_id) == (2, v2_id)
    assert client.get_version(subject, 1).schema_id == schema_id

    # a record written with v2 names v2's id; a v1 reader still reads it (the point of BACKWARD)
    payload2 = AvroSerializer(client, json.dumps(USER_V2),
                              conf={"auto.register.schemas": False, "use.latest.version": True}
                              )({**record, "email": "ada@example.org"}, ctx)
    assert _framing(payload2) == v2_id
    assert AvroDeserializer(client, json.dumps(USER_V1))(payload2, ctx) == record


def test_json_schema_serializer_registers_and_frames(schema_registry_url: str) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    topic = _topic()
    ctx = SerializationContext(topic, MessageField.VALUE)
    schema = {"type": "object", "properties": {"sensor": {"type": "string"}, "value": {"type": "number"}},
              "required": ["sensor", "value"]}
    client = SchemaRegistryClient({"url": schema_registry_url})
    record = {"sensor": "s-1", "value": 21.5}

    payload = JSONSerializer(json.dumps(schema), client)(record, ctx)
    schema_id = _framing(payload)
    assert json.loads(payload[5:]) == record
    registered = client.get_schema(schema_id)
    assert registered.schema_type == "JSON" and json.loads(registered.schema_str) == schema
    assert client.get_latest_version(f"{topic}-value").schema_id == schema_id
    assert JSONDeserializer(json.dumps(schema))(payload, ctx) == record


def _reading_message_class():
    """A protobuf message class built at run time (no protoc): ``jetspark.test.Reading``."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    proto = descriptor_pb2.FileDescriptorProto(name=f"jetspark_test_{uuid.uuid4().hex[:8]}.proto",
                                               package="jetspark.test", syntax="proto3")
    message = proto.message_type.add(name="Reading")
    field = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="sensor", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    message.field.add(name="value", number=2, type=field.TYPE_DOUBLE, label=field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("jetspark.test.Reading"))


def test_protobuf_serializer_registers_and_frames(schema_registry_url: str) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    reading = _reading_message_class()
    topic = _topic()
    ctx = SerializationContext(topic, MessageField.VALUE)
    client = SchemaRegistryClient({"url": schema_registry_url})
    record = reading(sensor="s-1", value=21.5)

    payload = ProtobufSerializer(reading, client, {"use.deprecated.format": False})(record, ctx)
    schema_id = _framing(payload)
    assert payload[5] == 0  # the message indexes: [0], the file's first message, written as one 0
    assert reading.FromString(payload[6:]) == record
    assert client.get_schema(schema_id).schema_type == "PROTOBUF"
    assert client.get_latest_version(f"{topic}-value").schema_id == schema_id
    assert ProtobufDeserializer(reading, {"use.deprecated.format": False})(payload, ctx) == record


def test_a_registry_that_cannot_start_fails_naming_the_cause(tmp_path: Path, monkeypatch) -> None:
    """What a test run shows when the service does not come up: the service, and its log."""
    home = tmp_path / "apicurio"
    home.mkdir()
    (home / f"apicurio-registry-app-{schema_registry.APICURIO_VERSION}-runner.jar").write_bytes(b"not a jar")
    monkeypatch.setenv("JETSPARK_SCHEMA_REGISTRY_HOME", str(home))
    with pytest.raises(ServiceError) as failed:
        schema_registry.start(tmp_path / "data", {"http": free_port()})
    message = str(failed.value)
    assert message.startswith("registry exited during start-up"), message
    assert "registry.log" in message and "GeneratedMain" in message, message  # the runner jar holds it
