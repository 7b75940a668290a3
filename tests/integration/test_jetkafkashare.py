"""jetkafkashare end to end with a real Kafka share group and a real local Spark."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from jetspark.datasources.kafkashare.source import KafkaShareDataSource
from tests.integration.scripts.kafkashare_common import (
    PlainShareConsumer,
    leftovers,
    produce,
    share_group,
    share_group_members,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sspark(spark):
    spark.dataSource.register(KafkaShareDataSource)
    return spark


class Collector:
    """A foreachBatch sink keeping each batch's rows (a replayed batch replaces its rows)."""

    def __init__(self) -> None:
        self.batches: dict[int, list] = {}

    def __call__(self, df, batch_id: int) -> None:
        self.batches[batch_id] = df.collect()

    def rows(self) -> list:
        return [r for b in sorted(self.batches) for r in self.batches[b]]


def _run(spark, bootstrap, topic, group, tmp_path, sink, **options):
    reader = (spark.readStream.format("jetkafkashare").option("kafka.bootstrap.servers", bootstrap)
              .option("kafka.group.id", group).option("subscribe", topic))
    for k, v in options.items():
        reader = reader.option(k, str(v))
    query = (reader.load().writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(tmp_path / "cp")).start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return query


def test_every_record_once_with_kafka_columns_and_delivery_count(sspark, kafka_bootstrap, kafka_topic,
                                                                   tmp_path):
    topic = kafka_topic(partitions=2)
    group = share_group(kafka_bootstrap)
    values = produce(kafka_bootstrap, topic, 50, partitions=2)
    sink = Collector()
    query = _run(sspark, kafka_bootstrap, topic, group, tmp_path, sink, maxOffsetsPerTrigger=20)
    rows = sink.rows()
    assert Counter(r.value for r in rows) == Counter(values)
    assert {(r.topic, r.partition) for r in rows} == {(topic, 0), (topic, 1)}
    assert all(r.key == str(int(r.value[1:])).encode() for r in rows)
    assert all(r.deliveryCount == 1 and r.timestampType == 0 for r in rows)
    end = json.loads(query.lastProgress["sources"][0]["endOffset"])
    assert set(end) == {"seq", "acquired", "absorbed", "unconfirmed"}
    # Every record was ACCEPTed: another member of the group finds nothing left.
    rest = PlainShareConsumer(kafka_bootstrap, group, topic)
    try:
        produce(kafka_bootstrap, topic, 1, partitions=1)  # a marker after them all
        rest.take_until(lambda: rest.values)
        assert rest.values == [b"v0"]  # the marker only
    finally:
        rest.close()


def test_a_second_share_consumer_takes_records_the_query_never_sees(sspark, kafka_bootstrap, kafka_topic,
                                                                      tmp_path):
    topic = kafka_topic(partitions=2)
    group = share_group(kafka_bootstrap)
    values = produce(kafka_bootstrap, topic, 60, partitions=2)
    other = PlainShareConsumer(kafka_bootstrap, group, topic, max_records=5)
    try:
        other.take_until(lambda: other.values)
    finally:
        # Leaving the group releases what its client acquired ahead and did not hand out
        # (librdkafka fetches ahead in the background: a member kept open but idle would hold
        # records under lock while the query runs).
        other.close()
    sink = Collector()
    _run(sspark, kafka_bootstrap, topic, group, tmp_path, sink, maxOffsetsPerTrigger=10)
    seen = [r.value for r in sink.rows()]
    assert seen and other.values
    assert not set(seen) & set(other.values)
    assert Counter(seen) + Counter(other.values) == Counter(values)


def test_records_handed_out_that_the_reader_cannot_find_fail_the_batch(sspark, kafka_bootstrap, kafka_topic,
                                                                       tmp_path):
    """Records of an aborted transaction: the share group (``share.isolation.level``
    read_uncommitted, its default) hands them out, the read tasks (read_committed) skip them.
    ACCEPTing them without a row would lose them silently: the batch fails, naming why."""
    from confluent_kafka import Producer
    from pyspark.errors import StreamingQueryException

    topic = kafka_topic(partitions=1)
    group = share_group(kafka_bootstrap)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": f"{group}-tx"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, f"aborted{i}".encode())
    producer.flush(30)
    producer.abort_transaction(30)
    with pytest.raises(StreamingQueryException, match="were not found reading the partition by offset"):
        _run(sspark, kafka_bootstrap, topic, group, tmp_path, Collector())


ORDER = json.dumps({"type": "object", "properties": {"id": {"type": "integer"}, "item": {"type": "string"}}})


def _orders(n: int) -> list[bytes]:
    """``n`` JSON orders, the third one not JSON at all (a poison record)."""
    values = [json.dumps({"id": i, "item": f"item{i}"}).encode() for i in range(n)]
    values[2] = b"\x00 not json"
    return values


def test_a_malformed_value_fails_the_batch_naming_it_with_on_malformed_fail(sspark, kafka_bootstrap,
                                                                             kafka_topic, tmp_path):
    from pyspark.errors import StreamingQueryException

    topic = kafka_topic(partitions=1)
    group = share_group(kafka_bootstrap)
    produce(kafka_bootstrap, topic, 4, partitions=1, values=_orders(4))
    with pytest.raises(StreamingQueryException, match=rf"value of {topic} partition 0 offset 2 did not"):
        _run(sspark, kafka_bootstrap, topic, group, tmp_path, Collector(),
             **{"value.format": "json-schema", "value.schema": ORDER, "value.onMalformed": "fail"})


def test_available_now_decodes_typed_values_accepts_its_last_batch_and_leaves_the_group(
        sspark, kafka_bootstrap, kafka_topic, tmp_path):
    """``Trigger.AvailableNow`` over typed values (``value.format`` as on jetkafka): every
    record once, decoded, the malformed one a row with ``valueError`` (``value.onMalformed=null``,
    the default) and ``deliveryCount`` before the error column; the query ends once the records
    produced before it are read, having ACCEPTed its last batch (Spark asks for one more batch),
    and leaves the group (Spark ends the source's process with SIGTERM): no member keeps
    partitions assigned until the session timeout, and a new member is handed nothing."""
    topic = kafka_topic(partitions=2)
    group = share_group(kafka_bootstrap)
    produce(kafka_bootstrap, topic, 30, partitions=2, values=_orders(30))
    reader = (sspark.readStream.format("jetkafkashare").option("kafka.bootstrap.servers", kafka_bootstrap)
              .option("kafka.group.id", group).option("subscribe", topic)
              .option("maxOffsetsPerTrigger", "20").option("value.format", "json-schema")
              .option("value.schema", ORDER))
    sink = Collector()
    query = (reader.load().writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None
    rows = sink.rows()
    assert list(rows[0].asDict())[-2:] == ["deliveryCount", "valueError"]
    assert sorted(r.value.id for r in rows if r.value is not None) == [i for i in range(30) if i != 2]
    (bad,) = [r for r in rows if r.valueError is not None]
    assert bad.value is None and bad.offset == 1 and bad.partition == 0  # the third record
    assert "has no active members" in share_group_members(kafka_bootstrap, group)
    assert leftovers(kafka_bootstrap, group, topic, 2) == []  # every record ACCEPTed, none handed out again
