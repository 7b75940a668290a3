"""``eventTime.field`` naming a number of a typed (Avro) value, on a real topic that mixes good
records with every number that is no time — 2**53+1, 2**62, -2**63 in a ``long``; NaN, ±inf,
1e300 in a ``double``: each is a malformed event time that follows ``eventTime.onMalformed``
(null: the record stays with a null ``eventTime``; fail: the documented error naming the
offset), never an ArrowInvalid out of the driver's ``latestOffset``."""

from __future__ import annotations

import json
import math

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from jetspark.errors import is_jetspark_error
from tests.integration.scripts.jetkafka_common import BASE_TS, produce_values, read_typed, stream_rows

pytestmark = pytest.mark.integration

SCHEMA = {"type": "record", "name": "Reading", "namespace": "events", "fields": [
    {"name": "n", "type": "int"}, {"name": "at_ms", "type": "long"}, {"name": "at_s", "type": "double"}]}
HOSTILE_LONGS = [2**53 + 1, 2**62, -2**63, 2**63 - 1]
HOSTILE_DOUBLES = [math.nan, math.inf, -math.inf, 1e300, -1e300]


@pytest.fixture
def readings(schema_registry_url, kafka_bootstrap, kafka_topic):
    """Good readings (n even) between hostile ones: the long field hostile in records 1, 3, 5,
    7; the double in 9, 11, 13, 15, 17."""
    topic = kafka_topic()
    serialize = AvroSerializer(SchemaRegistryClient({"url": schema_registry_url}), json.dumps(SCHEMA),
                               conf={"auto.register.schemas": True})
    context = SerializationContext(topic, MessageField.VALUE)
    records = []
    for i, bad in enumerate([*HOSTILE_LONGS, *([None] * len(HOSTILE_DOUBLES))]):
        records.append({"n": 2 * i, "at_ms": BASE_TS + i, "at_s": (BASE_TS + i) / 1000})
        records.append({"n": 2 * i + 1, "at_ms": BASE_TS if bad is None else bad, "at_s": BASE_TS / 1000})
    for j, bad in enumerate(HOSTILE_DOUBLES):
        records[2 * (len(HOSTILE_LONGS) + j) + 1]["at_s"] = bad
    records.append({"n": len(records), "at_ms": BASE_TS, "at_s": BASE_TS / 1000})
    produce_values(kafka_bootstrap, topic, [serialize(r, context) for r in records])
    return topic


@pytest.mark.parametrize(("field", "fmt", "bad"), [
    ("at_ms", "epochMillis", {1, 3, 5, 7}),
    ("at_s", "epochSeconds", {9, 11, 13, 15, 17}),
])
def test_numbers_that_are_no_time_are_null_event_times_and_every_record_arrives(
        spark, kafka_bootstrap, schema_registry_url, readings, tmp_path, field, fmt, bad):
    stream = read_typed(spark, kafka_bootstrap, readings, schema_registry_url, "avro", stream=True,
                        **{"eventTime.field": field, "eventTime.format": fmt,
                           "eventTime.onMalformed": "null"})
    rows = stream_rows(spark, stream.where("NOT heartbeat").select("value.n", "eventTime", "valueError"),
                       str(tmp_path / "cp"))
    assert [r.n for r in rows] == list(range(19)) and all(r.valueError is None for r in rows)
    assert {r.n for r in rows if r.eventTime is None} == bad


def test_fail_names_the_offset_of_the_first_number_that_is_no_time(
        spark, kafka_bootstrap, schema_registry_url, readings, tmp_path):
    stream = read_typed(spark, kafka_bootstrap, readings, schema_registry_url, "avro", stream=True,
                        **{"eventTime.field": "at_ms", "eventTime.onMalformed": "fail"})
    with pytest.raises(Exception) as caught:
        stream_rows(spark, stream, str(tmp_path / "cp"))
    assert is_jetspark_error(caught.value)
    expected = f"record at offset 1 of topic {readings!r} partition 0 has no valid eventTime.field 'at_ms'"
    assert expected in str(caught.value)
