"""jetkafka against a real Kafka and a real Spark: records, offsets, limits, partitions, loss."""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from pyspark_jetkafka import DefaultSource  # the one jetkafka format: source and sink

from tests.integration.scripts.jetkafka_common import BASE_TS, numbered, produce

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def jk(spark):
    spark.dataSource.register(DefaultSource)
    return spark


def stream(spark, bootstrap, topic, **options):
    reader = (spark.readStream.format("jetkafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load()


def run(df, tmp_path, name=None, *, available_now=True, checkpoint=None):
    """Run to the end, collecting every batch's rows (foreachBatch: restartable); (query, rows)."""
    name = name or f"q_{uuid.uuid4().hex[:8]}"
    rows: list = []
    writer = (df.writeStream.foreachBatch(lambda batch, _id: rows.extend(batch.collect()))
              .option("checkpointLocation", str(checkpoint or tmp_path / name)))
    if available_now:
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination(120)
    else:
        query = writer.start()
        query.processAllAvailable()
        query.stop()
    assert query.exception() is None
    return query, rows


def test_exact_records_for_given_starting_offsets(jk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(2)
    produce(kafka_bootstrap, topic, numbered(0, 0, 20) + numbered(1, 0, 20, ts0=BASE_TS + 500))
    df = stream(jk, kafka_bootstrap, topic, startingOffsets=json.dumps({topic: {"0": 5, "1": -2}}))
    _, rows = run(df, tmp_path)
    got = sorted((r.partition, r.offset, r.key, r.value, r.topic, r.timestampType,
                  int(r.timestamp.timestamp() * 1000)) for r in rows)
    want = sorted([(0, i, f"r0-{i}".encode(), f"v{i}".encode(), topic, 0, BASE_TS + i * 1000)
                   for i in range(5, 20)] +
                  [(1, i, f"r1-{i}".encode(), f"v{i}".encode(), topic, 0, BASE_TS + 500 + i * 1000)
                   for i in range(20)])
    assert got == want


def test_max_offsets_per_trigger_and_available_now(jk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(2)
    produce(kafka_bootstrap, topic, numbered(0, 0, 60) + numbered(1, 0, 40))
    df = stream(jk, kafka_bootstrap, topic, maxOffsetsPerTrigger=30)
    query, rows = run(df, tmp_path)
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert max(sizes) <= 30 and len(sizes) >= 4 and sum(sizes) == 100
    keys = sorted(r.key for r in rows)
    assert keys == sorted(k for _, k, _, _ in numbered(0, 0, 60) + numbered(1, 0, 40))


def test_min_offsets_per_trigger_waits_for_enough_data(jk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(1)
    produce(kafka_bootstrap, topic, numbered(0, 0, 10))
    name = f"q_{uuid.uuid4().hex[:8]}"
    df = stream(jk, kafka_bootstrap, topic, minOffsetsPerTrigger=25, maxTriggerDelay="1 hour")
    query = (df.writeStream.format("memory").queryName(name)
             .option("checkpointLocation", str(tmp_path / name)).start())
    try:
        query.processAllAvailable()
        assert jk.sql(f"SELECT * FROM {name}").count() == 0
        produce(kafka_bootstrap, topic, numbered(0, 10, 20))
        query.processAllAvailable()
        assert jk.sql(f"SELECT * FROM {name}").count() == 30
    finally:
        query.stop()


def test_headers(jk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(1)
    produce(kafka_bootstrap, topic, [
        (0, b"k1", b"v1", BASE_TS, [("h1", b"a"), ("h2", None), ("h1", b"b")]),
        (0, None, None, BASE_TS + 1, None),
    ])
    _, rows = run(stream(jk, kafka_bootstrap, topic, includeHeaders="true"), tmp_path)
    rows = sorted(rows, key=lambda r: r.offset)
    assert [(h.key, h.value) for h in rows[0].headers] == [("h1", b"a"), ("h2", None), ("h1", b"b")]
    assert rows[1].headers is None and rows[1].key is None and rows[1].value is None


def test_batch_read_between_offsets(jk, kafka_bootstrap, kafka_topic):
    topic = kafka_topic(2)
    produce(kafka_bootstrap, topic, numbered(0, 0, 10) + numbered(1, 0, 10))
    df = (jk.read.format("jetkafka").option("kafka.bootstrap.servers", kafka_bootstrap)
          .option("subscribe", topic)
          .option("startingOffsets", json.dumps({topic: {"0": 2, "1": -2}}))
          .option("endingOffsets", json.dumps({topic: {"0": 7, "1": -1}}))
          .option("minPartitions", "4").load())
    got = sorted((r.partition, r.offset, r.key) for r in df.collect())
    want = sorted([(0, i, f"r0-{i}".encode()) for i in range(2, 7)] +
                  [(1, i, f"r1-{i}".encode()) for i in range(10)])
    assert got == want
    assert df.rdd.getNumPartitions() >= 4


def test_max_records_per_partition_splits_a_batch_read_into_tasks(jk, kafka_bootstrap, kafka_topic):
    topic = kafka_topic(1)
    produce(kafka_bootstrap, topic, numbered(0, 0, 20))
    df = (jk.read.format("jetkafka").option("kafka.bootstrap.servers", kafka_bootstrap)
          .option("subscribe", topic).option("maxRecordsPerPartition", "6").load())
    assert sorted(r.offset for r in df.collect()) == list(range(20))
    assert df.rdd.getNumPartitions() == 4  # 20 offsets in pieces of at most 6


def test_new_partition_is_discovered_and_read_from_the_start(jk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(1)
    produce(kafka_bootstrap, topic, numbered(0, 0, 5))
    name = f"q_{uuid.uuid4().hex[:8]}"
    query = (stream(jk, kafka_bootstrap, topic).writeStream.format("memory").queryName(name)
             .option("checkpointLocation", str(tmp_path / name)).start())
    try:
        query.processAllAvailable()
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        admin.create_partitions([NewPartitions(topic, 2)])[topic].result(30)
        deadline = time.monotonic() + 30  # until the brokers' metadata shows the new partition
        while len(admin.list_topics(topic, timeout=10).topics[topic].partitions) < 2:
            assert time.monotonic() < deadline, "the new partition never showed in the metadata"
            time.sleep(0.1)
        # event times after W, or the new partition's records would be late (W never goes back)
        produce(kafka_bootstrap, topic, numbered(1, 0, 7, ts0=BASE_TS + 60_000) + numbered(0, 5, 1))
        query.processAllAvailable()
    finally:
        query.stop()
    rows = jk.sql(f"SELECT * FROM {name}").collect()
    got = sorted((r.partition, r.offset) for r in rows)
    assert got == sorted([(0, i) for i in range(6)] + [(1, i) for i in range(7)])


def test_transactional_topic_skips_aborted_records_and_control_offsets(jk, kafka_bootstrap, kafka_topic,
                                                                       tmp_path):
    topic = kafka_topic(1)
    tid = f"jk-{uuid.uuid4().hex[:6]}"
    produce(kafka_bootstrap, topic, numbered(0, 0, 5, tag="c"), transactional_id=tid)
    produce(kafka_bootstrap, topic, numbered(0, 5, 5, tag="a"), transactional_id=tid, abort=True)
    produce(kafka_bootstrap, topic, numbered(0, 10, 5, tag="c"), transactional_id=tid)
    _, rows = run(stream(jk, kafka_bootstrap, topic, maxOffsetsPerTrigger=4), tmp_path)
    got = sorted(r.key for r in rows)
    assert got == sorted([f"c0-{i}".encode() for i in (*range(5), *range(10, 15))])
    offsets = sorted(r.offset for r in rows)
    assert offsets[:5] == [0, 1, 2, 3, 4] and offsets[5] > 10  # commit markers and aborted data are gaps
    _, rows = run(stream(jk, kafka_bootstrap, topic, **{"kafka.isolation.level": "read_uncommitted"}),
                  tmp_path)
    seen = [(r.offset, r.key) for r in rows]
    assert sum(1 for r in rows if r.key.startswith(b"a0-")) == 5, seen


def _delete_before(bootstrap, topic, partition, offset):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_records([TopicPartition(topic, partition, offset)]).values():
        fut.result(30)


def test_data_loss_fails_with_topic_partition_and_offsets(jk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(1)
    produce(kafka_bootstrap, topic, numbered(0, 0, 10))
    checkpoint = tmp_path / "ck"
    run(stream(jk, kafka_bootstrap, topic), tmp_path, checkpoint=checkpoint)
    produce(kafka_bootstrap, topic, numbered(0, 10, 10))
    _delete_before(kafka_bootstrap, topic, 0, 15)
    query = (stream(jk, kafka_bootstrap, topic).writeStream.foreachBatch(lambda b, i: b.collect())
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    with pytest.raises(Exception) as err:
        query.awaitTermination(120)
    message = str(err.value)
    assert re.search(rf"data loss in topic '{topic}' partition 0\b", message), message
    assert re.search(r"\boffsets from 10\b", message), message
    assert re.search(r"\bearliest available offset is 15\b", message), message


def test_data_loss_skipped_when_fail_on_data_loss_false(jk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(1)
    produce(kafka_bootstrap, topic, numbered(0, 0, 10))
    checkpoint = tmp_path / "ck"
    run(stream(jk, kafka_bootstrap, topic), tmp_path, checkpoint=checkpoint)
    produce(kafka_bootstrap, topic, numbered(0, 10, 10))
    _delete_before(kafka_bootstrap, topic, 0, 15)
    _, rows = run(stream(jk, kafka_bootstrap, topic, failOnDataLoss="false"), tmp_path, checkpoint=checkpoint)
    assert sorted(r.offset for r in rows) == list(range(15, 20))


def test_subscribe_pattern_and_starting_offsets_by_timestamp(jk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(2)
    produce(kafka_bootstrap, topic, numbered(0, 0, 10) + numbered(1, 0, 10, ts0=BASE_TS + 4_500))
    df = (jk.readStream.format("jetkafka").option("kafka.bootstrap.servers", kafka_bootstrap)
          .option("subscribePattern", topic[:-3] + "...")
          .option("startingOffsetsByTimestamp", json.dumps({topic: {"0": BASE_TS + 6_000,
                                                                    "1": BASE_TS + 6_000}}))
          .load())
    _, rows = run(df, tmp_path)
    got = sorted((r.partition, r.offset) for r in rows)
    # first record at or after the timestamp: partition 0 offset 6, partition 1 offset 2 (ts 6.5 s)
    assert got == [(0, i) for i in range(6, 10)] + [(1, i) for i in range(2, 10)]
