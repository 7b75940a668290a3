"""The Kafka sink against a real Kafka broker and a real local Spark."""

from __future__ import annotations

import uuid
from collections import Counter

import pyarrow as pa
import pytest

from jetspark.errors import OptionError
from jetspark.sinks.kafka.options import KafkaSinkOptions
from jetspark.sinks.kafka.resource import KafkaResource
from jetspark.sinks.kafka.rows import KafkaColumns
from jetspark.sinks.transactional import PartitionKey, SinkError, write_partition
from tests.integration.scripts.sink_ids_source import IdsSource
from tests.integration.scripts.sink_kafka_read import committed_marker, read_topic
from tests.integration.scripts.sink_kafka_test_source import KafkaSinkTestSource

pytestmark = pytest.mark.integration

TOTAL, STEP = 100, 25


@pytest.fixture(scope="module")
def registered(spark):
    spark.dataSource.register(IdsSource)
    spark.dataSource.register(KafkaSinkTestSource)
    return spark


def _stream(spark, tmp_path, bootstrap, topic, guarantee, **options):
    stream = (spark.readStream.format("jetspark_test_ids").option("total", TOTAL).option("step", STEP).load()
              .selectExpr("CAST(id AS STRING) AS key", "name AS value"))
    writer = (stream.writeStream.format("jetkafka_sink_test").option("kafka.bootstrap.servers", bootstrap)
              .option("topic", topic).option("guarantee", guarantee)
              .option("checkpointLocation", str(tmp_path / f"ck-{uuid.uuid4().hex}")))
    for k, v in options.items():
        writer = writer.option(k, v)
    query = writer.start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return query


def _ids(records) -> Counter:
    return Counter(int(k) for k, *_ in records)


def test_exactly_once_stream_and_markers(registered, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(partitions=2)
    query = _stream(registered, tmp_path, kafka_bootstrap, topic, "exactly-once")
    records = read_topic(kafka_bootstrap, topic)
    assert _ids(records) == Counter(range(TOTAL))
    assert {(int(k), v) for k, v, *_ in records} == {(i, f"row-{i}".encode()) for i in range(TOTAL)}
    last_batch = TOTAL // STEP - 1
    for partition in (0, 1):
        group = f"jetspark.{query.id}.{partition}"  # transactional id = marker group
        assert committed_marker(kafka_bootstrap, group, topic) == last_batch + 1


def test_at_least_once_stream(registered, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(partitions=2)
    _stream(registered, tmp_path, kafka_bootstrap, topic, "at-least-once")
    assert _ids(read_topic(kafka_bootstrap, topic, "read_uncommitted")) == Counter(range(TOTAL))


def _options(bootstrap, topic, **extra) -> KafkaSinkOptions:
    return KafkaSinkOptions.parse({"kafka.bootstrap.servers": bootstrap, "topic": topic, **extra})


def _batch(*ids) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"key": [str(i) for i in ids], "value": [f"v{i}" for i in ids]})


COLUMNS = KafkaColumns(key=True, topic=False, partition=False, headers=False)


def test_zombie_attempt_is_fenced_and_its_records_never_read_committed(kafka_bootstrap, kafka_topic):
    topic = kafka_topic()
    sink = f"zombie-{uuid.uuid4().hex[:8]}"
    options = _options(kafka_bootstrap, topic, sinkId=sink)
    with KafkaResource(options, COLUMNS) as zombie, KafkaResource(options, COLUMNS) as retry:
        key0, key1 = PartitionKey(sink, 0, 0, 0), PartitionKey(sink, 0, 0, 1)
        assert not zombie.recover(key0)
        zombie.begin(key0)
        zombie.write(_batch(1, 2, 3))
        zombie._flush()  # its records are in the log, in an open transaction
        message = write_partition(retry, key1, iter([_batch(1, 2, 3)]))  # fences the zombie, commits
        assert message.rows == 3 and not message.skipped
        with pytest.raises(SinkError, match=r"(?i)fenced"):
            zombie.commit(zombie.prepare())
    assert _ids(read_topic(kafka_bootstrap, topic)) == Counter([1, 2, 3])
    uncommitted = read_topic(kafka_bootstrap, topic, "read_uncommitted")
    assert _ids(uncommitted) == Counter({1: 2, 2: 2, 3: 2})  # the aborted copies are in the log


def test_replayed_batch_is_skipped_by_marker(kafka_bootstrap, kafka_topic):
    topic = kafka_topic()
    sink = f"replay-{uuid.uuid4().hex[:8]}"
    options = _options(kafka_bootstrap, topic, sinkId=sink)
    for batch_id, ids in ((0, [1, 2]), (1, [3, 4])):
        with KafkaResource(options, COLUMNS) as r:
            assert not write_partition(r, PartitionKey(sink, batch_id, 0, 0), iter([_batch(*ids)])).skipped
    with KafkaResource(options, COLUMNS) as r:  # a restarted query replays batch 1
        assert write_partition(r, PartitionKey(sink, 1, 0, 0), iter([_batch(3, 4)])).skipped
    assert _ids(read_topic(kafka_bootstrap, topic)) == Counter([1, 2, 3, 4])


def test_batch_write_with_topic_partition_and_headers_columns(registered, kafka_bootstrap, kafka_topic):
    first, second = kafka_topic(partitions=2), kafka_topic()
    df = registered.createDataFrame(
        [(str(i), f"v{i}", first if i % 2 else second, 1 if i % 2 else None, [("h", f"x{i}".encode())])
         for i in range(20)],
        "key string, value string, topic string, partition int, "
        "headers array<struct<key:string,value:binary>>")
    (df.write.format("jetkafka_sink_test").option("kafka.bootstrap.servers", kafka_bootstrap)
     .option("markerTopic", second).mode("append").save())
    odd = read_topic(kafka_bootstrap, first)
    assert _ids(odd) == Counter(range(1, 20, 2)) and {p for *_, p, _ in odd} == {1}
    even = read_topic(kafka_bootstrap, second)
    assert _ids(even) == Counter(range(0, 20, 2))
    assert all(h == [("h", f"x{int(k)}".encode())] for k, _, _, h in even)


def test_bad_dataframe_and_options_fail_before_writing(registered, kafka_bootstrap, kafka_topic):
    topic = kafka_topic()
    df = registered.createDataFrame([(1, 2)], "key int, partition string")
    with pytest.raises(Exception) as e:
        df.write.format("jetkafka_sink_test").option("kafka.bootstrap.servers", kafka_bootstrap) \
            .option("topic", topic).mode("append").save()
    text = str(e.value)
    assert "required column 'value' (string or binary) is missing" in text
    assert "column 'key' is int; accepted: string or binary" in text
    assert "column 'partition' is string; accepted: int" in text
    with pytest.raises(OptionError, match=r"kafka\.transactional\.id"):
        _options(kafka_bootstrap, topic, **{"kafka.transactional.id": "x"})
    with pytest.raises(OptionError, match="markerTopic"):
        KafkaSinkOptions.parse({"kafka.bootstrap.servers": kafka_bootstrap})
    gone = "option 'mode' is gone: mode=transactional is now guarantee=exactly-once with commit=task"
    with pytest.raises(OptionError, match=gone):
        _options(kafka_bootstrap, topic, mode="transactional")
    with pytest.raises(OptionError, match=r"jetkafka cannot do commit=two-phase.*KIP-939"):
        _options(kafka_bootstrap, topic, commit="two-phase")
    secret = _options(kafka_bootstrap, topic, **{"kafka.sasl.password": "Hunter2x"})
    assert "Hunter2x" not in repr(secret) and secret.scrub("auth Hunter2x failed") == "auth *** failed"


def test_mixin_composes_with_the_jetkafka_source_class():
    from pyspark.sql import types as T

    from jetspark.datasources.kafka.source import KafkaDataSource
    from jetspark.sinks.kafka.writer import KafkaSinkMixin, KafkaStreamWriter

    class Combined(KafkaSinkMixin, KafkaDataSource):
        pass

    source = Combined({"kafka.bootstrap.servers": "h:9092", "topic": "t", "checkpointLocation": "/x"})
    writer = source.streamWriter(T.StructType([T.StructField("value", T.StringType())]), False)
    assert isinstance(writer, KafkaStreamWriter) and writer.options.topic == "t"
    assert Combined.name() == "jetkafka"


def test_records_kafka_refuses_go_to_the_dead_letter_topic_once(registered, kafka_bootstrap, kafka_topic,
                                                                tmp_path):
    """A partition the topic lacks (ids ending in 3), a value over the topic's max.message.bytes (7) and a
    null topic (5) are dead letters, in the tasks' transactions; the stream goes on."""
    topic, dead = kafka_topic(partitions=2), kafka_topic()
    stream = (registered.readStream.format("jetspark_test_ids").option("total", TOTAL).option("step", STEP)
              .load().selectExpr(
                  "CAST(id AS STRING) AS key",
                  "CASE WHEN id % 10 = 7 THEN repeat('x', 1100000) ELSE name END AS value",
                  f"CASE WHEN id % 10 = 5 THEN NULL ELSE '{topic}' END AS topic",
                  "CASE WHEN id % 10 = 3 THEN 9 END AS partition"))
    query = (stream.writeStream.format("jetkafka_sink_test")
             .option("kafka.bootstrap.servers", kafka_bootstrap)
             .option("markerTopic", topic).option("deadLetterTopic", dead)
             .option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    refused = {i: i % 10 for i in range(TOTAL) if i % 10 in (3, 5, 7)}
    assert _ids(read_topic(kafka_bootstrap, topic)) == Counter(i for i in range(TOTAL) if i not in refused)
    dead_records = read_topic(kafka_bootstrap, dead)
    assert _ids(dead_records) == Counter(list(refused))  # a multiset: each dead letter exactly once
    letters = {int(k): (v, dict(h)) for k, v, _, h in dead_records}
    for i, digit in refused.items():
        value, headers = letters[i]
        assert headers["jetspark.rejected.sink"] == str(query.id).encode()
        reason = headers["jetspark.rejected.reason"].decode()
        if digit == 3:
            assert value == f"row-{i}".encode() and headers["jetspark.rejected.partition"] == b"9"
            assert reason == f"partition 9 does not exist: topic '{topic}' has 2 partitions"
        elif digit == 5:
            assert reason == "its topic is null and option 'topic' is not set"
        else:
            assert value is None and headers["jetspark.rejected.valueBytes"] == b"1100000"
            # refused before the producer's own message.max.bytes: the topic's broker-side
            # max.message.bytes (1 MiB by default) is the lower limit
            assert f"over the max.message.bytes of topic '{topic}'" in reason
            assert headers["jetspark.rejected.topic"] == topic.encode()


_MAX, _BIG = 100_000, 150_000  # kafka.message.max.bytes, and a size over it
_HEADERS = "array<struct<key: string, value: binary>>"


def test_dead_letters_fit_and_jetspark_headers_come_first(registered, kafka_bootstrap, kafka_topic):
    """A record refused for a huge key (1), huge headers (2) or a huge invalid topic (3) gets a
    dead letter that fits: the part that was too large is dropped (its size in
    jetspark.rejected.<part>Bytes), the topic and reason are cut with a marker, and
    jetspark.rejected.cut names what was cut. The record's own jetspark.rejected.* headers (4)
    are removed; jetspark's come first."""
    topic, dead = kafka_topic(partitions=2), kafka_topic()
    df = registered.range(6).selectExpr(
        "CAST(id AS STRING) AS value",
        f"CASE WHEN id = 1 THEN repeat('k', {_BIG}) ELSE CAST(id AS STRING) END AS key",
        f"CASE WHEN id = 3 THEN repeat('!', {_BIG}) ELSE '{topic}' END AS topic",
        "CASE WHEN id = 4 THEN 9 END AS partition",
        f"""CAST(CASE
              WHEN id = 2 THEN array(named_struct('key', 'h', 'value', CAST(repeat('y', {_BIG}) AS BINARY)))
              WHEN id = 4 THEN array(
                named_struct('key', 'jetspark.rejected.reason', 'value', CAST('forged' AS BINARY)),
                named_struct('key', 'mine', 'value', CAST('kept' AS BINARY)))
            END AS {_HEADERS}) AS headers""")
    (df.coalesce(1).write.format("jetkafka_sink_test").option("kafka.bootstrap.servers", kafka_bootstrap)
     .option("markerTopic", topic).option("deadLetterTopic", dead)
     .option("kafka.message.max.bytes", str(_MAX)).mode("append").save())
    assert Counter(v for _, v, *_ in read_topic(kafka_bootstrap, topic)) == Counter([b"0", b"5"])
    records = read_topic(kafka_bootstrap, dead)
    assert Counter(v for _, v, *_ in records) == Counter([b"1", b"2", b"3", b"4"])  # each exactly once
    letters = {v: (k, h) for k, v, _, h in records}
    for key, headers in letters.values():
        names = [n for n, _ in headers]
        assert names[0] == "jetspark.rejected.topic" and names.count("jetspark.rejected.reason") == 1
        assert sum(len(n) + len(v or b"") for n, v in headers) + len(key or b"") < _MAX
    key, headers = letters[b"1"]
    assert key is None and dict(headers)["jetspark.rejected.keyBytes"] == str(_BIG).encode()
    assert dict(headers)["jetspark.rejected.cut"] == b"key"
    key, headers = letters[b"2"]
    assert key == b"2" and dict(headers)["jetspark.rejected.headersBytes"] == str(_BIG + 1).encode()
    assert "h" not in dict(headers) and dict(headers)["jetspark.rejected.cut"] == b"headers"
    key, headers = letters[b"3"]
    shown = dict(headers)
    assert key == b"3" and shown["jetspark.rejected.cut"] == b"topic"
    assert shown["jetspark.rejected.topic"].startswith(b"!!!")
    assert shown["jetspark.rejected.topic"].endswith(f"…[cut: {_BIG} bytes]".encode())
    assert shown["jetspark.rejected.reason"].startswith(b"topic '!!!")
    assert f"…[cut: {_BIG} characters]' is not a valid topic".encode() in shown["jetspark.rejected.reason"]
    key, headers = letters[b"4"]
    assert [n for n, _ in headers if not n.startswith("jetspark.")] == ["mine"]
    assert b"forged" not in [v for _, v in headers]
    assert dict(headers)["jetspark.rejected.cut"] == b"forgedHeaders"
    assert dict(headers)["jetspark.rejected.reason"].startswith(b"partition 9 does not exist")


def test_on_rejected_fail_stops_naming_the_row(registered, kafka_bootstrap, kafka_topic):
    topic = kafka_topic(partitions=2)
    df = registered.createDataFrame([("1", "a", 0), ("2", "b", 5)], "key string, value string, partition int")
    with pytest.raises(Exception) as e:
        (df.coalesce(1).write.format("jetkafka_sink_test").option("kafka.bootstrap.servers", kafka_bootstrap)
         .option("topic", topic).option("onRejected", "fail").mode("append").save())
    text = str(e.value)
    assert "Kafka refuses row 1 of batch 0, partition 0: partition 5 does not exist" in text
    assert f"dead-letter topic {topic}.rejected" in text
    assert read_topic(kafka_bootstrap, topic) == []  # the task's transaction was aborted


_TOPIC_LIMIT, _OVER = 4_000, 6_000  # a topic's max.message.bytes, and a value over it (under the producer's)


def test_a_record_over_its_topics_max_message_bytes_is_refused_and_the_rest_lands_once(
        registered, kafka_bootstrap, kafka_topic, tmp_path):
    """The topic's broker-side limit (max.message.bytes, far under the producer's 1 MB): one
    record over it (id 42) is a dead letter cut to the dead-letter topic's own small limit; the
    good records, 25 of 300 bytes a batch (more than the limit together), land exactly once."""
    topic = kafka_topic(partitions=2, max_message_bytes=str(_TOPIC_LIMIT))
    dead = kafka_topic(max_message_bytes="1500")
    stream = (registered.readStream.format("jetspark_test_ids").option("total", TOTAL).option("step", STEP)
              .load().selectExpr(
                  "CAST(id AS STRING) AS key",
                  f"CASE WHEN id = 42 THEN repeat('x', {_OVER}) ELSE repeat('g', 300) END AS value"))
    query = (stream.writeStream.format("jetkafka_sink_test")
             .option("kafka.bootstrap.servers", kafka_bootstrap).option("topic", topic)
             .option("deadLetterTopic", dead).option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    assert _ids(read_topic(kafka_bootstrap, topic)) == Counter(i for i in range(TOTAL) if i != 42)
    letters = read_topic(kafka_bootstrap, dead)
    assert _ids(letters) == Counter([42])
    [(_, value, _, headers)] = letters
    shown = dict(headers)
    assert value is None and shown["jetspark.rejected.valueBytes"] == str(_OVER).encode()
    reason = shown["jetspark.rejected.reason"].decode()
    assert f"over the max.message.bytes of topic '{topic}' ({_TOPIC_LIMIT})" in reason


def test_a_record_over_its_topics_limit_with_on_rejected_fail_names_the_row(registered, kafka_bootstrap,
                                                                            kafka_topic):
    topic = kafka_topic(max_message_bytes=str(_TOPIC_LIMIT))
    df = registered.createDataFrame([("1", "a"), ("2", "x" * _OVER)], "key string, value string")
    with pytest.raises(Exception) as e:
        (df.coalesce(1).write.format("jetkafka_sink_test").option("kafka.bootstrap.servers", kafka_bootstrap)
         .option("topic", topic).option("onRejected", "fail").mode("append").save())
    text = str(e.value)
    assert "Kafka refuses row 1 of batch 0, partition 0: the record is" in text
    assert f"over the max.message.bytes of topic '{topic}' ({_TOPIC_LIMIT})" in text
    assert read_topic(kafka_bootstrap, topic) == []  # the task's transaction was aborted
