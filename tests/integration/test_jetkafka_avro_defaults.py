"""Every Avro logical type's default through schema evolution, against confluent-kafka's own
``AvroDeserializer`` (fastavro) on the same records: written by ``AvroSerializer`` under v1
(which lacks the fields) and v2 (which has them, with defaults) into a real registry and a
real topic, read by jetkafka with v2 (the subject's latest) as the reader schema. Both sides
are compared in Avro's own units (days, ms or µs, unscaled decimals), so a default taken in
the wrong unit shows."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time
from decimal import Decimal

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.integration.scripts.jetkafka_common import produce_values, read_typed

pytestmark = pytest.mark.integration

_FIXED4 = {"type": "fixed", "name": "Four", "size": 4, "logicalType": "decimal", "precision": 9, "scale": 2}
FIELDS = [  # (name, type, default as Avro's JSON encoding, a v2 record's value)
    ("d", {"type": "int", "logicalType": "date"}, 20454, date(2025, 2, 3)),
    ("tm", {"type": "int", "logicalType": "time-millis"}, 3_723_004, time(1, 2, 3, 4000)),
    ("tu", {"type": "long", "logicalType": "time-micros"}, 3_723_004_005, time(1, 2, 3, 4005)),
    ("tsm", {"type": "long", "logicalType": "timestamp-millis"}, 1_767_225_600_000,
     datetime(2025, 6, 1, 12, 0, 0, 123000, tzinfo=UTC)),
    ("tsu", {"type": "long", "logicalType": "timestamp-micros"}, 1_767_225_600_000_001,
     datetime(2025, 6, 1, 12, 0, 0, 123456, tzinfo=UTC)),
    ("ltm", {"type": "long", "logicalType": "local-timestamp-millis"}, 1_767_225_600_000,
     datetime(2025, 6, 1, 12, 0, 0, 123000)),
    ("ltu", {"type": "long", "logicalType": "local-timestamp-micros"}, 1_767_225_600_000_001,
     datetime(2025, 6, 1, 12, 0, 0, 123456)),
    ("db", {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}, "\u0001\u00e2\u0040",
     Decimal("-7.5")),
    ("df", _FIXED4, "\u0000\u0001\u00e2\u0040", Decimal("99.99")),
    ("u", {"type": "string", "logicalType": "uuid"}, "6f1e3b6a-2f7c-4a8e-9d3b-1c2d3e4f5a6b",
     "0b8f2c1e-5d6a-4f3b-8c9d-0e1f2a3b4c5d"),
    ("un", ["null", {"type": "long", "logicalType": "timestamp-millis"}], None,
     datetime(2025, 6, 1, tzinfo=UTC)),
    ("uf", [{"type": "long", "logicalType": "timestamp-millis"}, "null"], 1_767_225_600_000, None),
    ("rec", {"type": "record", "name": "At", "fields": [
        {"name": "when", "type": {"type": "long", "logicalType": "timestamp-millis"}}]},
     {"when": 1_767_225_600_000}, {"when": datetime(2025, 6, 1, tzinfo=UTC)}),
]
V1 = {"type": "record", "name": "Evolved", "namespace": "defaults",
      "fields": [{"name": "id", "type": "long"}]}
V2 = {**V1, "fields": V1["fields"] + [{"name": n, "type": t, "default": d} for n, t, d, _ in FIELDS]}


def _logical(avro_type: object) -> str | None:
    if isinstance(avro_type, list):
        return next(_logical(b) for b in avro_type if b != "null")
    return avro_type.get("logicalType") if isinstance(avro_type, dict) else None


def _raw(avro_type: object, value: object) -> object:
    """A value in Avro's own encoding of its logical type (what a default is written in)."""
    if value is None:
        return None
    if isinstance(avro_type, dict) and avro_type.get("type") == "record":
        return {f["name"]: _raw(f["type"], (value if isinstance(value, dict) else value.asDict())[f["name"]])
                for f in avro_type["fields"]}
    logical = _logical(avro_type)
    if isinstance(value, datetime):
        naive = value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
        us = (naive - datetime(1970, 1, 1)) // _US
        return us // 1000 if logical.endswith("millis") else us
    if isinstance(value, date):
        return (value - date(1970, 1, 1)).days
    if isinstance(value, time):
        us = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
        return us // 1000 if logical == "time-millis" else us
    if isinstance(value, Decimal):
        return int(value.scaleb(2))
    if isinstance(value, int):
        return value
    if logical == "decimal" and isinstance(value, str):
        return int.from_bytes(value.encode("latin-1"), "big", signed=True)
    return str(value)


_US = datetime(1970, 1, 1, 0, 0, 0, 1) - datetime(1970, 1, 1)


def test_every_logical_types_default_reads_as_confluent_kafkas_deserializer_reads_it(
        spark, kafka_bootstrap, schema_registry_url, kafka_topic):
    topic = kafka_topic()
    client = SchemaRegistryClient({"url": schema_registry_url})
    context = SerializationContext(topic, MessageField.VALUE)
    conf = {"auto.register.schemas": True}
    old = AvroSerializer(client, json.dumps(V1), conf=conf)({"id": 1}, context)
    new = AvroSerializer(client, json.dumps(V2), conf=conf)(
        {"id": 2, **{n: v for n, _, _, v in FIELDS}}, context)
    produce_values(kafka_bootstrap, topic, [old, new])

    reference = AvroDeserializer(client, json.dumps(V2))
    expected = [reference(value, context) for value in (old, new)]
    rows = read_typed(spark, kafka_bootstrap, topic, schema_registry_url, "avro").orderBy("offset").collect()
    assert [r.valueError for r in rows] == [None, None]
    for want, row in zip(expected, rows, strict=True):
        got = row.value.asDict()
        for name, avro_type, _, _ in FIELDS:
            assert (name, _raw(avro_type, got[name])) == (name, _raw(avro_type, want[name]))
    assert _raw(FIELDS[3][1], rows[0].value.tsm) == 1_767_225_600_000  # 2026-01-01, not 1970-01-21

