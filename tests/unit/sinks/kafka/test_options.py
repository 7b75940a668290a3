"""Kafka sink options, DataFrame checks and row → record mapping: pure logic."""

from __future__ import annotations

from types import SimpleNamespace

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException
from pyspark.sql import types as T

from jetspark.errors import OptionError
from jetspark.sinks.kafka.options import KafkaSinkOptions
from jetspark.sinks.kafka.rejected import RejectingProducer
from jetspark.sinks.kafka.rows import KafkaColumns, check_schema, produce_batch
from jetspark.sinks.transactional import PartitionKey, SinkError

BASE = {"kafka.bootstrap.servers": "h:9092", "topic": "out"}


def test_defaults_prefix_and_transactional_id():
    o = KafkaSinkOptions.parse({**BASE, "kafka.linger.ms": "5", "Commit": "Task"})
    assert (o.guarantee, o.commit) == ("exactly-once", "task") and o.transactional and o.marker_topic == "out"
    # keys are placed as Spark's sink (the Java client) places them
    assert o.producer_config() == {"bootstrap.servers": "h:9092", "linger.ms": "5",
                                   "partitioner": "murmur2_random"}
    assert KafkaSinkOptions.parse({**BASE, "kafka.partitioner": "consistent_random"}).producer_config()[
        "partitioner"] == "consistent_random"
    assert o.transactional_id("q-1", 3) == "jetspark.q-1.3"
    assert KafkaSinkOptions.parse(BASE).commit == "task"
    at_least_once = KafkaSinkOptions.parse({**BASE, "guarantee": "at-least-once"})
    assert at_least_once.commit == "none" and not at_least_once.transactional


@pytest.mark.parametrize("raw, option", [
    ({"topic": "t"}, "kafka.bootstrap.servers"),
    ({**BASE, "kafka.transactional.id": "x"}, "kafka.transactional.id"),
    ({**BASE, "kafka.enable.idempotence": "false"}, "kafka.enable.idempotence"),
    ({**BASE, "mode": "once"}, "mode"),
    ({**BASE, "commit": "two-phase"}, "commit"),
    ({**BASE, "commit": "upsert"}, "commit"),
    ({**BASE, "guarantee": "at-least-once", "commit": "task"}, "commit"),
    ({**BASE, "sinkId": "a b"}, "sinkId"),
    ({**BASE, "transactionalIdPrefix": "x/y"}, "transactionalIdPrefix"),
    ({"kafka.bootstrap.servers": "h:9092"}, "markerTopic"),
    ({**BASE, "subscribe": "t"}, "subscribe"),
])
def test_bad_options(raw, option):
    with pytest.raises(OptionError) as e:
        KafkaSinkOptions.parse(raw)
    assert e.value.option == option and "accepted" in str(e.value)


def test_at_least_once_with_topic_column_needs_no_marker_topic_and_secrets_are_hidden():
    o = KafkaSinkOptions.parse({"kafka.bootstrap.servers": "h:9092", "guarantee": "at-least-once",
                                "kafka.sasl.password": "Hunter2x"})
    assert o.marker_topic is None and "Hunter2x" not in repr(o)
    assert o.scrub("SASL failed with Hunter2x") == "SASL failed with ***"


def _schema(**fields: T.DataType) -> T.StructType:
    return T.StructType([T.StructField(n, t) for n, t in fields.items()])


def test_check_schema_accepts_spark_kafka_columns_and_ignores_others():
    headers = T.ArrayType(T.StructType([T.StructField("key", T.StringType()),
                                        T.StructField("value", T.BinaryType())]))
    cols = check_schema(_schema(key=T.BinaryType(), value=T.StringType(), topic=T.StringType(),
                                partition=T.IntegerType(), headers=headers, other=T.LongType()), None)
    assert cols == KafkaColumns(key=True, topic=True, partition=True, headers=True)
    assert check_schema(_schema(value=T.BinaryType()), "t") == KafkaColumns(False, False, False, False)


def test_check_schema_lists_every_problem():
    with pytest.raises(SinkError) as e:
        check_schema(_schema(key=T.LongType(), headers=T.StringType()), None)
    text = str(e.value)
    assert "required column 'value'" in text and "column 'key' is bigint" in text
    assert "column 'headers' is string" in text and "set the option 'topic' or add a 'topic' column" in text


class FakeProducer:
    """Records produce calls; the first call of each row may raise BufferError (queue full); a
    value over ``max_bytes`` is refused as librdkafka refuses it."""

    def __init__(self, full_every: int = 0, max_bytes: int = 1 << 20) -> None:
        self.records: list[tuple] = []
        self.polls = 0
        self.full_every = full_every
        self.max_bytes = max_bytes
        self.calls = 0

    def produce(self, topic, value=None, key=None, **kwargs):
        self.calls += 1
        if self.full_every and self.calls % self.full_every == 0:
            raise BufferError("queue full")
        if value is not None and len(value) > self.max_bytes:
            raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "Broker: Message size too large"))
        self.records.append((topic, value, key, kwargs))

    def poll(self, timeout):
        self.polls += 1


class Kept:
    """A ``reject`` that keeps what it is given, and the partition counts of two topics."""

    def __init__(self) -> None:
        self.rejections: list = []
        self.asked: list[str] = []

    def __call__(self, rejection, value, key, headers) -> None:
        self.rejections.append((rejection, value, key, headers))

    def partitions(self, topic: str):
        self.asked.append(topic)
        return {"a": 4, "option": 2}.get(topic)  # None: not known (being created)


def _produce(p: FakeProducer, batch, columns: KafkaColumns, topic: str | None, kept: Kept | None = None
             ) -> int:
    kept = kept or Kept()
    return produce_batch(p.produce, p.poll, batch, columns, topic, kept, kept.partitions)


def test_produce_batch_simple_path_retries_when_queue_is_full():
    p = FakeProducer(full_every=3)
    batch = pa.RecordBatch.from_pydict({"key": ["1", "2", None, "4"], "value": [b"a", b"b", b"c", None]})
    assert _produce(p, batch, KafkaColumns(True, False, False, False), "t") == 4
    assert [r[:3] for r in p.records] == [("t", b"a", "1"), ("t", b"b", "2"), ("t", b"c", None),
                                          ("t", None, "4")]
    assert p.polls >= 1


def test_produce_batch_with_topic_partition_headers():
    p, kept = FakeProducer(full_every=2), Kept()
    batch = pa.RecordBatch.from_pydict({
        "value": ["x", "y"], "topic": ["a", None], "partition": pa.array([2, None], pa.int32()),
        "headers": [[{"key": "h", "value": b"1"}], []],
    })
    assert _produce(p, batch, KafkaColumns(False, True, True, True), None, kept) == 1
    assert p.records == [("a", "x", None, {"partition": 2, "headers": [("h", b"1")]})]
    [(rejection, value, _, _)] = kept.rejections
    assert (rejection.row, rejection.topic, value) == (1, None, "y")
    assert rejection.why.reason == "its topic is null and option 'topic' is not set"
    assert kept.asked == ["a"]  # the metadata of each topic of the batch, once


def test_rows_kafka_would_refuse_are_rejected_not_produced():
    """A partition the topic lacks, an invalid topic name and a record over message.max.bytes go
    to ``reject``, the other rows to the producer, in order; a topic the broker does not know yet
    (None: maybe being created) is left to the producer."""
    p, kept = FakeProducer(full_every=3, max_bytes=5), Kept()
    batch = pa.RecordBatch.from_pydict({
        "value": ["ok", "p9", "bad", "toolong", "new", "neg"], "key": ["k0", "k1", "k2", "k3", "k4", "k5"],
        "topic": ["a", "a", "no such!", "a", "new", "a"],
        "partition": pa.array([3, 9, None, None, 7, -1], pa.int32()),
    })
    assert _produce(p, batch, KafkaColumns(True, True, True, False), None, kept) == 2
    assert [(r[0], r[1]) for r in p.records] == [("a", "ok"), ("new", "new")]
    rows = {r.row: r.why for r, *_ in kept.rejections}
    assert sorted(rows) == [1, 2, 3, 5]
    assert rows[1].reason == "partition 9 does not exist: topic 'a' has 4 partitions"
    assert not rows[1].too_large
    assert rows[2].reason.startswith("topic 'no such!' is not a valid topic name")
    assert rows[3].too_large and "Message size too large" in rows[3].reason
    assert rows[5].reason.startswith("partition -1 does not exist")
    assert sorted(kept.asked) == ["a", "new"]  # an invalid name needs no metadata


def test_without_a_partition_column_no_metadata_is_asked():
    p, kept = FakeProducer(), Kept()
    batch = pa.RecordBatch.from_pydict({"value": ["x", "y"], "topic": ["a", "b"]})
    assert _produce(p, batch, KafkaColumns(False, True, False, False), None, kept) == 2
    assert kept.asked == [] and kept.rejections == []


def test_the_simple_path_rejects_a_record_over_message_max_bytes():
    p, kept = FakeProducer(full_every=2, max_bytes=3), Kept()
    batch = pa.RecordBatch.from_pydict({"value": [b"a", b"toolong", b"b"]})
    assert _produce(p, batch, KafkaColumns(False, False, False, False), "t", kept) == 2
    assert [r[1] for r in p.records] == [b"a", b"b"]
    [(rejection, value, _, _)] = kept.rejections
    assert (rejection.row, rejection.topic, rejection.why.too_large, value) == (1, "t", True, b"toolong")


def test_topic_option_overrides_the_topic_column_as_in_spark():
    p = FakeProducer(full_every=100)
    batch = pa.RecordBatch.from_pydict({"value": ["x", "y"], "topic": ["a", None],
                                        "partition": pa.array([1, None], pa.int32())})
    _produce(p, batch, KafkaColumns(False, True, True, False), "option")
    assert p.records == [("option", "x", None, {"partition": 1}), ("option", "y", None, {})]


def test_on_rejected_and_the_dead_letter_topic():
    base = {"kafka.bootstrap.servers": "h:1"}
    o = KafkaSinkOptions.parse({**base, "topic": "events"})
    assert (o.on_rejected, o.dead_letter_topic) == ("dead-letter", "events.rejected")
    o = KafkaSinkOptions.parse({**base, "markerTopic": "m", "onRejected": "Fail"})
    assert (o.on_rejected, o.dead_letter_topic) == ("fail", "jetspark.rejected")
    long = KafkaSinkOptions.parse({**base, "topic": "t" * 249}).dead_letter_topic
    assert len(long) <= 249 and long.endswith(".rejected")
    for raw, option in [({"topic": "events", "onRejected": "drop"}, "onRejected"),
                        ({"topic": "events", "deadLetterTopic": "events"}, "deadLetterTopic"),
                        ({"topic": "events", "deadLetterTopic": "bad name"}, "deadLetterTopic"),
                        ({"topic": "no such!"}, "topic")]:
        with pytest.raises(OptionError) as e:
            KafkaSinkOptions.parse({**base, **raw})
        assert e.value.option == option


class _Metadata:
    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = {t: SimpleNamespace(partitions=dict.fromkeys(range(n)), error=None)
                       for t, n in topics.items()}


class FakeTaskProducer(FakeProducer):
    """A producer whose metadata knows the given topics."""

    def __init__(self, topics: dict[str, int], **kwargs) -> None:
        super().__init__(**kwargs)
        self.topics = topics

    def list_topics(self, topic=None, timeout=None):
        return _Metadata({t: n for t, n in self.topics.items() if t == topic})


def _records(on_rejected: str) -> tuple[RejectingProducer, FakeTaskProducer]:
    options = KafkaSinkOptions.parse({"kafka.bootstrap.servers": "h:1", "topic": "a",
                                      "kafka.sasl.password": "Hunter2x", "onRejected": on_rejected})
    producer = FakeTaskProducer({"a": 2, "a.rejected": 1}, max_bytes=4)
    key = PartitionKey("sink1", 7, 3, 0)
    return RejectingProducer(options, KafkaColumns(True, False, True, True), key, producer), producer


def test_a_dead_letter_keeps_the_record_and_says_where_it_was_going():
    records, producer = _records("dead-letter")
    first = pa.RecordBatch.from_pydict({"key": ["k0"], "value": ["ok"],
                                        "partition": pa.array([1], pa.int32()),
                                        "headers": [[{"key": "h", "value": b"1"}]]})
    second = pa.RecordBatch.from_pydict({"key": ["k1", "k2"], "value": ["p5", "toolong"],
                                         "partition": pa.array([5, None], pa.int32()), "headers": [[], []]})
    assert records.write(first) == 1 and records.write(second) == 0
    assert (records.rows, records.rejected) == (1, 2)
    letters = {r[2]: r for r in producer.records if r[0] == "a.rejected"}
    _, value, _, kwargs = letters["k1"]
    headers = dict(kwargs["headers"])
    assert value == "p5" and headers["jetspark.rejected.partition"] == "5"
    assert headers["jetspark.rejected.reason"] == "partition 5 does not exist: topic 'a' has 2 partitions"
    assert (headers["jetspark.rejected.sink"], headers["jetspark.rejected.batch"]) == ("sink1", "7")
    _, value, _, kwargs = letters["k2"]
    assert value is None and dict(kwargs["headers"])["jetspark.rejected.valueBytes"] == "7"


def test_on_rejected_fail_names_the_row_of_the_task():
    records, _ = _records("fail")
    records.write(pa.RecordBatch.from_pydict({"key": ["k0"], "value": ["ok"],
                                              "partition": pa.array([0], pa.int32()), "headers": [[]]}))
    with pytest.raises(SinkError) as e:
        records.write(pa.RecordBatch.from_pydict({"key": ["k1"], "value": ["x"],
                                                  "partition": pa.array([9], pa.int32()), "headers": [[]]}))
    text = str(e.value)
    assert "Kafka refuses row 1 of batch 7, partition 3: partition 9 does not exist" in text
    assert "dead-letter topic a.rejected" in text and "Hunter2x" not in text


def test_options_spark_itself_passes_are_accepted():
    opts = KafkaSinkOptions.parse({"kafka.bootstrap.servers": "h:1", "topic": "t",
                                   "queryName": "q", "checkpointLocation": "/c"})
    assert opts.topic == "t"


def test_a_record_over_its_topics_max_message_bytes_is_rejected_before_the_producer():
    """Key, value and headers with Kafka's framing against each topic's limit (None: unknown)."""
    limits = {"small": 200, "option": 150}.get
    p, kept = FakeProducer(), Kept()
    batch = pa.RecordBatch.from_pydict({
        "key": ["k", "k", "k", "k"], "value": ["v" * 50, "v" * 150, "v" * 50, "v" * 500],
        "topic": ["small", "small", "unknown", "unknown"],
        "headers": pa.array([[], [], [{"key": "h", "value": b"x" * 90}], []],
                            pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))})
    columns = KafkaColumns(True, True, False, True)
    assert produce_batch(p.produce, p.poll, batch, columns, None, kept, kept.partitions, limits) == 3
    [(rejection, value, _, _)] = kept.rejections
    assert (rejection.row, rejection.topic, value) == (1, "small", "v" * 150) and rejection.why.too_large
    assert rejection.why.reason == ("the record is 242 bytes (key, value and headers before "
                                    "compression, with Kafka's framing), over the max.message.bytes of "
                                    "topic 'small' (200)")
    kept = Kept()  # the topic option: every row's topic, also on the path without per-row columns
    assert produce_batch(p.produce, p.poll, batch, KafkaColumns(True, False, False, False), "option", kept,
                         kept.partitions, limits) == 2
    assert [r[0].row for r in kept.rejections] == [1, 3]
