"""jetkafka's Avro values on real services: records written by confluent-kafka's own
``AvroSerializer`` (Confluent's wire format, schemas in a real registry — Apicurio's
Confluent-compatible API) read by ``format("jetkafka")`` with ``value.format=avro`` into typed
columns: two writer versions resolved to the reader schema (a field added with a default, a
field removed), and each kind of malformed value kept as a row saying why, or failing the
read when asked."""

from __future__ import annotations

import json
import struct
import time
import uuid
from datetime import UTC, datetime

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient, record_subject_name_strategy
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from jetspark.datasources.kafka.source import KafkaDataSource
from jetspark.errors import is_jetspark_error
from tests.integration.scripts.jetkafka_common import produce, produce_values, read_typed, stream_rows

pytestmark = pytest.mark.integration

V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": "string"},
    {"name": "legacy", "type": "string"},
    {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
]}
V2 = {**V1, "fields": [f for f in V1["fields"] if f["name"] != "legacy"]
      + [{"name": "channel", "type": "string", "default": "web"},
         {"name": "note", "type": ["null", "string"], "default": None}]}
PLACED = datetime(2026, 1, 1, tzinfo=UTC)


def _serialized(registry: str, topic: str, schema: dict, record: dict, **conf) -> bytes:
    client = SchemaRegistryClient({"url": registry})
    serializer = AvroSerializer(client, json.dumps(schema), conf={"auto.register.schemas": True, **conf})
    return serializer(record, SerializationContext(topic, MessageField.VALUE))


@pytest.fixture
def orders(schema_registry_url, kafka_bootstrap, kafka_topic):
    """A topic with an order written under v1, two under v2 (its subject's latest), and one
    value of each malformed kind."""
    topic = kafka_topic()
    line = {"sku": "a", "qty": 2}
    first = _serialized(schema_registry_url, topic, V1, {
        "id": 1, "customer": "ann", "legacy": "x", "placed": PLACED, "lines": [line]})
    second = _serialized(schema_registry_url, topic, V2, {
        "id": 2, "customer": "bob", "placed": PLACED, "lines": [], "channel": "shop", "note": "gift"})
    third = _serialized(schema_registry_url, topic, V2, {
        "id": 3, "customer": "cy", "placed": PLACED, "lines": [line, line], "channel": "web", "note": None})
    unknown_id = b"\x00" + struct.pack(">I", 999_999) + second[5:]
    values = [first, second, third, b"plain text", unknown_id, third[:-3], None]
    produce_values(kafka_bootstrap, topic, values)
    return topic


def _read(spark, bootstrap: str, topic: str, registry: str, **extra: str):
    return read_typed(spark, bootstrap, topic, registry, "avro", **extra)


def test_values_of_two_writer_versions_and_each_malformed_kind(
        spark, kafka_bootstrap, schema_registry_url, orders):
    df = _read(spark, kafka_bootstrap, orders, schema_registry_url)
    fields = ["id", "customer", "placed", "lines", "channel", "note"]
    assert df.schema["value"].dataType.fieldNames() == fields
    rows = df.orderBy("offset").select("offset", "value", "valueError").collect()
    values = [r.value.asDict(recursive=True) if r.value is not None else None for r in rows]
    placed = PLACED.replace(tzinfo=None)  # the session's time zone is UTC
    line = {"sku": "a", "qty": 2}
    assert values[:3] == [
        {"id": 1, "customer": "ann", "placed": placed, "lines": [line], "channel": "web", "note": None},
        {"id": 2, "customer": "bob", "placed": placed, "lines": [], "channel": "shop", "note": "gift"},
        {"id": 3, "customer": "cy", "placed": placed, "lines": [line, line], "channel": "web", "note": None},
    ]
    assert values[3:] == [None] * 4
    errors = [r.valueError for r in rows]
    assert errors[:3] == [None] * 3 and errors[6] is None  # the tombstone is no error
    assert "not in Confluent's wire format" in errors[3]
    assert errors[4] == "schema id 999999 is not in the Schema Registry"
    assert errors[5].endswith("the payload ends inside a value")


def test_a_pinned_version_reads_with_that_schema(spark, kafka_bootstrap, schema_registry_url, orders):
    df = _read(spark, kafka_bootstrap, orders, schema_registry_url, **{"value.schema.version": "1"})
    rows = df.where("valueError IS NULL AND value IS NOT NULL").orderBy("offset").select("value.*").collect()
    assert [(r.id, r.legacy) for r in rows[:1]] == [(1, "x")]
    # v2's records lack "legacy", which v1 has without a default: they do not resolve
    errors = [r.valueError for r in df.orderBy("offset").collect()][1:3]
    assert all("does not resolve to the reader's schema" in e and "legacy" in e for e in errors)


def test_flattened_values_are_columns_of_their_own(spark, kafka_bootstrap, schema_registry_url, orders):
    df = _read(spark, kafka_bootstrap, orders, schema_registry_url, **{"value.flatten": "true"})
    assert df.columns[:3] == ["key", "id", "customer"] and "value" not in df.columns
    rows = df.orderBy("offset").select("id", "channel", "note", "valueError").collect()
    assert [(r.id, r.channel, r.note) for r in rows[:3]] == [
        (1, "web", None), (2, "shop", "gift"), (3, "web", None)]
    assert [r.valueError is None for r in rows] == [True, True, True, False, False, False, True]


def test_fail_names_the_first_malformed_record(spark, kafka_bootstrap, schema_registry_url, orders):
    df = _read(spark, kafka_bootstrap, orders, schema_registry_url, **{"value.onMalformed": "fail"})
    with pytest.raises(Exception) as caught:
        df.collect()
    assert is_jetspark_error(caught.value)
    assert f"{orders} partition 0 offset 3 did not decode" in str(caught.value)


def test_an_unknown_subject_fails_the_plan_naming_it(spark, kafka_bootstrap, schema_registry_url):
    topic = f"nothing_{uuid.uuid4().hex[:8]}"
    with pytest.raises(Exception, match=rf"/subjects/{topic}-value/versions/latest with HTTP 404"):
        _read(spark, kafka_bootstrap, topic, schema_registry_url).schema  # noqa: B018 (planning)


def test_a_stream_reads_typed_values(spark, kafka_bootstrap, schema_registry_url, orders, tmp_path):
    """The streaming reader plans with the same reader schema and decodes in its tasks."""
    stream = read_typed(spark, kafka_bootstrap, orders, schema_registry_url, "avro", stream=True)
    rows = stream_rows(spark, stream.select("offset", "value.id", "value.channel", "valueError"),
                       str(tmp_path / "cp"))
    assert [(r.id, r.channel) for r in rows[:3]] == [(1, "web"), (2, "shop"), (3, "web")]
    assert [r.valueError is None for r in rows] == [True, True, True, False, False, False, True]


def test_avro_keys_from_their_own_subject_beside_json_schema_values(
        spark, kafka_bootstrap, schema_registry_url, kafka_topic):
    """Keys written by AvroSerializer under ``<topic>-key`` and values by JSONSerializer: each
    column typed by its own options, ``keyError`` before ``valueError``."""
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    topic = kafka_topic()
    client = SchemaRegistryClient({"url": schema_registry_url})
    key_schema = {"type": "record", "name": "OrderKey", "fields": [{"name": "shop", "type": "string"},
                                                                   {"name": "id", "type": "long"}]}
    keys = AvroSerializer(client, json.dumps(key_schema), conf={"auto.register.schemas": True})
    values = JSONSerializer(json.dumps({"type": "object", "properties": {"total": {"type": "number"}}}),
                            client, conf={"auto.register.schemas": True})
    key_ctx = SerializationContext(topic, MessageField.KEY)
    value_ctx = SerializationContext(topic, MessageField.VALUE)
    records = [(keys({"shop": "north", "id": 7}, key_ctx), values({"total": 12.5}, value_ctx)),
               (b"not avro", values({"total": 3}, value_ctx))]
    now = int(time.time() * 1000)
    produce(kafka_bootstrap, topic, [(0, k, v, now + i) for i, (k, v) in enumerate(records)])
    spark.dataSource.register(KafkaDataSource)
    df = (spark.read.format("jetkafka").option("kafka.bootstrap.servers", kafka_bootstrap)
          .option("subscribe", topic).option("schemaRegistry.url", schema_registry_url)
          .option("key.format", "avro").option("value.format", "json-schema").load())
    assert df.columns[-2:] == ["keyError", "valueError"]
    rows = df.orderBy("offset").select("key", "value.total", "keyError", "valueError").collect()
    assert rows[0].key.asDict() == {"shop": "north", "id": 7} and rows[0].total == 12.5
    assert rows[1].key is None and "not in Confluent's wire format" in rows[1].keyError
    assert rows[1].total == 3.0 and [r.valueError for r in rows] == [None, None]


def test_event_time_from_a_typed_field(spark, kafka_bootstrap, schema_registry_url, orders, tmp_path):
    """``eventTime.field`` names the reader schema's timestamp-millis field: the eventTime
    column holds it, and a value that did not decode has none (onMalformed=null)."""
    stream = read_typed(spark, kafka_bootstrap, orders, schema_registry_url, "avro", stream=True,
                        **{"eventTime.field": "placed", "eventTime.onMalformed": "null"})
    assert stream.columns[-2:] == ["eventTime", "valueError"]
    rows = stream_rows(spark, stream.where("NOT heartbeat").select("offset", "eventTime", "value.placed"),
                       str(tmp_path / "cp"))
    placed = PLACED.replace(tzinfo=None)
    assert [r.eventTime for r in rows] == [placed] * 3 + [None] * 4
    assert all(r.eventTime == r.placed for r in rows[:3])


def test_a_registry_down_during_a_query_fails_it_naming_the_registry_and_a_restart_goes_on(
        spark, kafka_bootstrap, schema_registry_url, kafka_topic, tmp_path):
    """The registry through a proxy that stops answering after batch 0: batch 1 carries a
    writer version no worker has seen, so its task must ask, waits ``schemaRegistry.timeout``
    and fails the query with an error that names the registry and the option (never a
    malformed row). With the registry back, the query restarted on its checkpoint reads batch 1:
    every record once over the two runs (a file sink, exactly once). Down at start: planning
    fails the same way."""
    from urllib.parse import urlsplit

    from tests.tcp_proxy import TcpProxy

    topic = kafka_topic()
    parts = urlsplit(schema_registry_url)
    proxy = TcpProxy(parts.hostname, parts.port)
    user_info, at, _ = parts.netloc.rpartition("@")  # the local registry's user and password kept
    via_proxy = parts._replace(netloc=f"{user_info}{at}{parts.hostname}:{proxy.port}").geturl()
    line = {"sku": "a", "qty": 1}

    def produce_orders(schema: dict, ids: range, conf: dict | None = None, **extra) -> None:
        now = int(time.time() * 1000)
        record = {"customer": "c", "placed": PLACED, "lines": [line], **extra}
        produce(kafka_bootstrap, topic, [
            (0, None, _serialized(schema_registry_url, topic, schema, {"id": i, **record}, **(conf or {})),
             now + i) for i in ids])

    def start():
        spark.dataSource.register(KafkaDataSource)
        stream = (spark.readStream.format("jetkafka").option("kafka.bootstrap.servers", kafka_bootstrap)
                  .option("subscribe", topic).option("startingOffsets", "earliest")
                  .option("value.format", "avro").option("schemaRegistry.url", via_proxy)
                  .option("schemaRegistry.timeout", "2s").load())
        return (stream.select("value.id", "valueError").writeStream.format("parquet")
                .option("path", str(tmp_path / "out")).option("checkpointLocation", str(tmp_path / "cp"))
                .start())

    try:
        produce_orders(V1, range(0, 5), legacy="x")
        query = start()
        query.processAllAvailable()
        proxy.stall_connects()
        # a new writer schema id (v1 and a field), under a subject of its own: the reader stays v1
        produce_orders({**V1, "fields": [*V1["fields"], {"name": "note", "type": "string"}]}, range(5, 10),
                       {"subject.name.strategy": record_subject_name_strategy}, legacy="x", note="n")
        with pytest.raises(Exception) as caught:
            query.processAllAvailable()
        text = str(caught.value)
        assert "cannot reach the Schema Registry (schemaRegistry.url)" in text
        assert "schemaRegistry.timeout" in text
        query.stop()
        with pytest.raises(Exception, match=r"cannot reach the Schema Registry"):
            start()  # down at start: the plan asks for the latest version
        proxy.heal()
        query = start()
        query.processAllAvailable()
        query.stop()
        rows = spark.read.parquet(str(tmp_path / "out")).collect()  # the sink's log: committed files only
        assert sorted(r.id for r in rows) == list(range(10))
        assert all(r.valueError is None for r in rows)
    finally:
        proxy.close()


def test_a_replayed_batch_is_decoded_with_the_schema_it_was_planned_with(
        spark, kafka_bootstrap, schema_registry_url, kafka_topic, tmp_path):
    """Batch 0 planned with v1 (the subject's latest then) and not committed — its commit file
    removed, as a crash before the commit leaves it —, v2 registered since: the restart on the
    latest (v2) refuses to replay it with v2, naming both and the option; pinned to v1 it
    replays batch 0 as planned; then a restart on the latest reads the next batches with v2."""
    topic = kafka_topic()
    line = {"sku": "a", "qty": 1}
    subject = f"{topic}-value"

    def produce_orders(schema: dict, ids: range, **extra) -> None:
        now = int(time.time() * 1000)
        produce(kafka_bootstrap, topic, [
            (0, None, _serialized(schema_registry_url, topic, schema, {
                "id": i, "customer": "c", "placed": PLACED, "lines": [line], **extra}), now + i)
            for i in ids])

    def run(attempt: int, **extra: str) -> None:
        """A run into a file sink of its own (a sink that holds the batch already would skip it)."""
        stream = read_typed(spark, kafka_bootstrap, topic, schema_registry_url, "avro", stream=True, **extra)
        query = (stream.select("value.id").writeStream.format("parquet")
                 .option("path", str(tmp_path / f"out-{attempt}"))
                 .option("checkpointLocation", str(tmp_path / "cp"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()

    produce_orders(V1, range(0, 3), legacy="x")
    run(0)
    for name in ("0", ".0.crc"):  # batch 0 planned, never committed
        (tmp_path / "cp" / "commits" / name).unlink()
    produce_orders(V2, range(3, 6), channel="web", note=None)  # v2 now the subject's latest
    with pytest.raises(Exception) as caught:
        run(1)
    assert is_jetspark_error(caught.value)
    assert (f"planned by an earlier run with the values' reader schema subject {subject} version 1" in
            str(caught.value)) and "Restart with value.schema.version=1" in str(caught.value)
    run(2, **{"value.schema.version": "1"})  # the replay, as planned (and v2's records after it, with v1)
    replayed = [r.id for r in spark.read.parquet(str(tmp_path / "out-2" / "*.parquet")).collect()]
    assert sorted(i for i in replayed if i is not None) == [0, 1, 2]
    produce_orders(V2, range(6, 9), channel="web", note=None)
    run(3)  # on the latest again: the next batch is planned, and read, with v2
    # the files themselves: the sink's log of a later run starts at its first batch, not 0
    assert sorted(r.id for r in spark.read.parquet(str(tmp_path / "out-3" / "*.parquet")).collect()) == [
        6, 7, 8]
