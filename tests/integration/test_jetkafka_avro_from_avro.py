"""jetkafka's Avro values judged by Spark's own decoder: the same records, written by
confluent-kafka's ``AvroSerializer`` against the real registry, read by ``format("jetkafka")``
with ``value.format=avro`` and by Spark's ``from_avro`` (spark-avro from Maven, in the shared
session: the ``spark_avro`` marker, tests/conftest.py) must be equal field by field, with the
same Spark type.

Every Avro type and logical type, unions (with null, and of several types: a struct of
``member0``, ``member1``, … on both sides), defaults, and evolution: records of writer v1 and
v2 under one subject, the reader being the latest (v2). ``from_avro`` takes the payload
without Confluent's 5-byte header (``substring(value, 6)``), its writer schema, and the reader
schema in the ``avroSchema`` option, per writer version, in ``PERMISSIVE`` mode (a malformed
payload is a null value; jetkafka's is a null value with a reason in ``valueError``).

spark-avro 4.3.0 is not served by the Maven repository at hand: 4.2.0, the newest served
(``SPARK_AVRO`` in jetspark/devtools/maven.py), runs on PySpark 4.3.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime, time
from decimal import Decimal

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

from tests.integration.scripts.jetkafka_common import produce_values, read_typed

pytestmark = [pytest.mark.integration, pytest.mark.spark_avro]

KIND_V1 = {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C"]}
KIND_V2 = {"type": "enum", "name": "Kind", "symbols": ["A", "B"], "default": "A"}
COMMON = [
    {"name": "id", "type": "long"},
    {"name": "flag", "type": "boolean"},
    {"name": "small", "type": "int"},
    {"name": "ratio", "type": "float"},
    {"name": "score", "type": "double"},
    {"name": "blob", "type": "bytes"},
    {"name": "name", "type": "string"},
    {"name": "tag", "type": {"type": "fixed", "name": "Tag", "size": 4}},
    {"name": "items", "type": {"type": "array", "items": "int"}},
    {"name": "attrs", "type": {"type": "map", "values": "string"}},
    {"name": "inner", "type": {"type": "record", "name": "Inner", "fields": [
        {"name": "x", "type": "int"}, {"name": "y", "type": ["null", "string"], "default": None}]}},
    {"name": "inners", "type": {"type": "array", "items": "Inner"}},
    {"name": "maybe", "type": ["null", "string"], "default": None},
    {"name": "later", "type": ["string", "null"], "default": "s"},
    {"name": "either", "type": ["int", "string"]},
    {"name": "three", "type": ["null", "int", "string"], "default": None},
    {"name": "recs", "type": ["null", "Inner", "long"], "default": None},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "tmillis", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "tmicros", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "tsms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tsus", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "ltsms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "ltsus", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "pricef", "type": {"type": "fixed", "name": "Money", "size": 8, "logicalType": "decimal",
                                "precision": 12, "scale": 3}},
    {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
]
V1 = {"type": "record", "name": "Everything", "namespace": "diff", "fields": [
    *COMMON,
    {"name": "promo", "type": "int"},
    {"name": "wide", "type": "float"},
    {"name": "text", "type": "string"},
    {"name": "kind", "type": KIND_V1},
    {"name": "dropped", "type": "string"},
]}
# v2, the reader: "dropped" removed, promotions, an enum with a default, fields added with defaults
V2 = {"type": "record", "name": "Everything", "namespace": "diff", "fields": [
    *COMMON,
    {"name": "promo", "type": "long"},
    {"name": "wide", "type": "double"},
    {"name": "text", "type": "bytes"},
    {"name": "kind", "type": KIND_V2},
    {"name": "added_s", "type": "string", "default": "dflt"},
    {"name": "added_n", "type": ["null", "long"], "default": None},
    {"name": "added_i", "type": "int", "default": -3},
    {"name": "added_arr", "type": {"type": "array", "items": "string"}, "default": ["p", "q"]},
    {"name": "added_map", "type": {"type": "map", "values": "int"}, "default": {"k": 1}},
    {"name": "added_rec", "type": {"type": "record", "name": "Added", "fields": [
        {"name": "a", "type": "int"}, {"name": "b", "type": "string"}]}, "default": {"a": 5, "b": "bee"}},
    {"name": "added_kind", "type": "Kind", "default": "B"},
    {"name": "added_day", "type": {"type": "int", "logicalType": "date"}, "default": 20_454},
    {"name": "added_ts", "type": {"type": "long", "logicalType": "timestamp-millis"},
     "default": 1_767_225_600_123},
]}
TS_DEFAULT = "added_ts"  # a timestamp-millis default through evolution (it was read as microseconds)
# Documented difference (docs/reference/avro.md, "Types"): time-micros is a bigint of
# microseconds after midnight in jetkafka, TIME(6) in from_avro since Spark 4.1.
TIME_MICROS = "tmicros"


def _common(i: int, *, nulls: bool) -> dict:
    return {
        "id": i, "flag": i % 2 == 0, "small": -(2**31) if i == 1 else i * 7, "ratio": 1.5 * i,
        "score": float("-inf") if i == 2 else 1e300 / (i + 1), "blob": bytes([i, 0, 255]), "name": f"név-{i}",
        "tag": bytes([i, 1, 2, 3]), "items": [] if nulls else [i, -i, 2**31 - 1],
        "attrs": {} if nulls else {"a": f"{i}", "ü": ""},
        "inner": {"x": i, "y": None if nulls else "why"},
        "inners": [{"x": 1, "y": None}, {"x": 2, "y": "z"}] if not nulls else [],
        "maybe": None if nulls else "m", "later": None if nulls else "l",
        "either": i if i % 2 == 0 else f"s{i}",
        "three": None if nulls else (i if i % 2 else f"t{i}"),
        "recs": None if nulls else ({"x": 9, "y": "r"} if i % 2 else 2**40),
        "day": date(1969, 12, 31) if i == 1 else date(2026, 1, i + 1),
        "tmillis": time(23, 59, 59, 999_000), "tmicros": time(0, 0, 0, i),
        "tsms": datetime(2026, 1, 1, 12, 0, 0, 123_000, tzinfo=UTC),
        "tsus": datetime(1960, 5, 6, 7, 8, 9, 123_456, tzinfo=UTC),
        "ltsms": datetime(2026, 3, 4, 5, 6, 7, 8_000), "ltsus": datetime(2026, 3, 4, 5, 6, 7, 8),
        "price": Decimal("-12345678.91") if i == 1 else Decimal(f"{i}.05"),
        "pricef": Decimal("123456789.123"), "uid": str(uuid.UUID(int=i)),
    }


def _v1(i: int, *, nulls: bool = False) -> dict:
    return {**_common(i, nulls=nulls), "promo": 2**31 - 1, "wide": 0.1, "text": "tëxt",
            "kind": "C" if i % 2 else "B", "dropped": "gone"}


def _v2(i: int, *, nulls: bool = False) -> dict:
    return {**_common(i, nulls=nulls), "promo": 2**40, "wide": 0.1, "text": b"\x00\xff", "kind": "A",
            "added_s": "set", "added_n": None if nulls else 11, "added_i": 3, "added_arr": [],
            "added_map": {}, "added_rec": {"a": 1, "b": ""}, "added_kind": "A", "added_day": 0,
            "added_ts": datetime(2000, 1, 1, tzinfo=UTC)}


@pytest.fixture(scope="module")
def written(schema_registry_url, kafka_bootstrap):
    """A topic of records of v1 then v2 (the subject's latest) and malformed payloads behind a
    valid header: ``(topic, [(offset, writer version or None, Confluent payload)])``."""
    topic = f"jet_from_avro_{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30)[topic].result(timeout=30)
    client = SchemaRegistryClient({"url": schema_registry_url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    v1, v2 = (AvroSerializer(client, json.dumps(s), conf={"auto.register.schemas": True}) for s in (V1, V2))
    records = [(1, v1(_v1(i, nulls=i == 3), ctx)) for i in range(1, 5)]
    records += [(2, v2(_v2(i, nulls=i == 7), ctx)) for i in range(5, 9)]
    assert records[-1][1][20] == 6  # blob's length: id, flag, small take a byte each, ratio 4, score 8
    good = records[-1][1]
    header = good[:5]
    records += [(2, good[:-1]), (2, good[: len(good) // 2]), (2, header),  # cut short
                (2, header + b"\x81"),  # a varint that never ends
                (2, header + good[5:20] + b"\x01" + good[21:]),  # a negative length (-1) for "blob"
                (2, good + b"\x00")]  # a byte after the record
    produce_values(kafka_bootstrap, topic, [payload for _, payload in records])
    yield topic, [(offset, version, payload) for offset, (version, payload) in enumerate(records)]
    admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=30)


def _plain(v):
    """A value as plain Python: rows as dicts, binary as bytes."""
    if hasattr(v, "asDict"):
        return {k: _plain(x) for k, x in v.asDict().items()}
    if isinstance(v, bytearray):
        return bytes(v)
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


@pytest.fixture(scope="module")
def both(spark, kafka_bootstrap, schema_registry_url, written):
    """jetkafka's and from_avro's ``value`` of each offset, and both value types."""
    topic, records = written
    jet = read_typed(spark, kafka_bootstrap, topic, schema_registry_url, "avro")
    jet_rows = {r.offset: (_plain(r.value), r.valueError)
                for r in jet.select("offset", "value", "valueError").collect()}
    raw = spark.createDataFrame([(o, w, p) for o, w, p in records], "offset long, writer int, payload binary")
    body = F.expr("substring(payload, 6)")
    reader = json.dumps(V2)
    decoded = (F.when(F.col("writer") == 1, from_avro(body, json.dumps(V1),
                                                             {"avroSchema": reader, "mode": "PERMISSIVE"}))
               .otherwise(from_avro(body, reader, {"mode": "PERMISSIVE"})))
    theirs = raw.select("offset", decoded.alias("value"))
    spark_rows = {r.offset: _plain(r.value) for r in theirs.collect()}
    return jet.schema["value"].dataType, theirs.schema["value"].dataType, jet_rows, spark_rows


def test_the_value_type_is_from_avros(both):
    jet_type, spark_type, _, _ = both
    assert jet_type.fieldNames() == spark_type.fieldNames()
    pair = (jet_type[TIME_MICROS].dataType, spark_type[TIME_MICROS].dataType)
    assert [t.simpleString() for t in pair] == ["bigint", "time(6)"]
    assert {f.name: f.dataType.simpleString() for f in jet_type if f.name != TIME_MICROS} == {
        f.name: f.dataType.simpleString() for f in spark_type if f.name != TIME_MICROS}


def _micros(t: time) -> int:
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond


def _differences(both, offsets, fields_left_out=()) -> list[str]:
    _, _, jet, spark = both
    out = []
    for offset in offsets:
        ours, theirs = jet[offset][0], spark[offset]
        if ours is None or theirs is None:
            if ours != theirs:
                out.append(f"offset {offset}: jetkafka {ours!r} ({jet[offset][1]}), from_avro {theirs!r}")
            continue
        theirs = {**theirs, TIME_MICROS: _micros(theirs[TIME_MICROS])}  # the documented mapping
        out += [f"offset {offset} field {k}: jetkafka {ours.get(k)!r}, from_avro {v!r}"
                for k, v in theirs.items() if k not in fields_left_out and ours.get(k) != v]
    return out


def test_each_writer_version_reads_as_from_avro_reads_it(both, written):
    _, records = written
    decodable = [o for o, _, _ in records[:8]]
    _, _, jet, spark = both
    assert all(spark[o] is not None and jet[o][1] is None for o in decodable)  # both decoded them all
    assert _differences(both, decodable) == []
    # what the comparison covers: a writer's symbol the reader lacks, a default, a promotion
    assert (spark[0]["kind"], spark[0]["added_rec"], spark[0]["promo"]) == (
        "A", {"a": 5, "b": "bee"}, 2**31 - 1)
    assert spark[0]["either"] == {"member0": None, "member1": "s1"}  # a union of several types: a struct


def test_a_timestamp_millis_default_reads_as_from_avro_reads_it(both):
    _, _, jet, spark = both
    assert spark[0][TS_DEFAULT] == datetime(2026, 1, 1, 0, 0, 0, 123_000)  # from_avro's, UTC session
    assert jet[0][0][TS_DEFAULT] == spark[0][TS_DEFAULT]


def test_malformed_payloads_are_null_on_both_sides_and_jetkafka_says_why(both, written):
    """Documented difference (docs/reference/avro.md, "Malformed values"): from_avro's
    PERMISSIVE mode gives a struct of nulls, jetkafka a null value and the reason."""
    _, records = written
    malformed = [o for o, _, _ in records[8:13]]
    _, _, jet, spark = both
    assert [set(spark[o].values()) for o in malformed] == [{None}] * len(malformed)
    assert [jet[o][0] for o in malformed] == [None] * len(malformed)
    schema_id = int.from_bytes(records[8][2][1:5], "big")
    reasons = ["the payload ends inside a value"] * 4 + ["a length or item count out of range"]
    assert [jet[o][1] for o in malformed] == [f"schema id {schema_id}: {r}" for r in reasons]


def test_bytes_after_the_record_are_ignored_as_from_avro_ignores_them(both, written):
    _, records = written
    trailing = records[13][0]
    _, _, jet, spark = both
    assert jet[trailing][1] is None and _differences(both, [trailing]) == []
    assert spark[trailing] == spark[7]  # the record before the byte

