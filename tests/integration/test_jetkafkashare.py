"""jetkafkashare end to end with a real Kafka share group and a real local Spark."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from jetspark.datasources.kafkashare.source import KafkaShareDataSource
from tests.integration.scripts.kafkashare_common import PlainShareConsumer, produce, share_group

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
        sink = Collector()
        _run(sspark, kafka_bootstrap, topic, group, tmp_path, sink, maxOffsetsPerTrigger=10)
        seen = [r.value for r in sink.rows()]
        other.take_until(lambda: len(seen) + len(other.values) >= len(values))
    finally:
        other.close()
    assert seen and other.values
    assert not set(seen) & set(other.values)
    assert Counter(seen) + Counter(other.values) == Counter(values)
