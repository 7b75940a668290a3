"""Kafka sink options, DataFrame checks and row → record mapping: pure logic."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from jetspark.errors import OptionError
from jetspark.sinks.kafka.options import KafkaSinkOptions
from jetspark.sinks.kafka.rows import KafkaColumns, check_schema, produce_batch
from jetspark.sinks.transactional import SinkError

BASE = {"kafka.bootstrap.servers": "h:9092", "topic": "out"}


def test_defaults_prefix_and_transactional_id():
    o = KafkaSinkOptions.parse({**BASE, "kafka.linger.ms": "5", "Commit": "Task"})
    assert (o.guarantee, o.commit) == ("exactly-once", "task") and o.transactional and o.marker_topic == "out"
    assert o.producer_config() == {"bootstrap.servers": "h:9092", "linger.ms": "5"}
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
    """Records produce calls; the first call of each row may raise BufferError (queue full)."""

    def __init__(self, full_every: int = 0) -> None:
        self.records: list[tuple] = []
        self.polls = 0
        self.full_every = full_every
        self.calls = 0

    def produce(self, topic, value=None, key=None, **kwargs):
        self.calls += 1
        if self.full_every and self.calls % self.full_every == 0:
            raise BufferError("queue full")
        self.records.append((topic, value, key, kwargs))

    def poll(self, timeout):
        self.polls += 1


def test_produce_batch_simple_path_retries_when_queue_is_full():
    p = FakeProducer(full_every=3)
    batch = pa.RecordBatch.from_pydict({"key": ["1", "2", None, "4"], "value": [b"a", b"b", b"c", None]})
    assert produce_batch(p.produce, p.poll, batch, KafkaColumns(True, False, False, False), "t") == 4
    assert [r[:3] for r in p.records] == [("t", b"a", "1"), ("t", b"b", "2"), ("t", b"c", None),
                                          ("t", None, "4")]
    assert p.polls >= 1


def test_produce_batch_with_topic_partition_headers():
    p = FakeProducer(full_every=2)
    batch = pa.RecordBatch.from_pydict({
        "value": ["x", "y"], "topic": ["a", None], "partition": pa.array([2, None], pa.int32()),
        "headers": [[{"key": "h", "value": b"1"}], []],
    })
    with pytest.raises(SinkError, match="null 'topic'"):
        produce_batch(p.produce, p.poll, batch, KafkaColumns(False, True, True, True), None)
    assert p.records == [("a", "x", None, {"partition": 2, "headers": [("h", b"1")]})]


def test_topic_option_overrides_the_topic_column_as_in_spark():
    p = FakeProducer(full_every=100)
    batch = pa.RecordBatch.from_pydict({"value": ["x", "y"], "topic": ["a", None],
                                        "partition": pa.array([2, None], pa.int32())})
    produce_batch(p.produce, p.poll, batch, KafkaColumns(False, True, True, False), "option")
    assert p.records == [("option", "x", None, {"partition": 2}), ("option", "y", None, {})]


def test_options_spark_itself_passes_are_accepted():
    opts = KafkaSinkOptions.parse({"kafka.bootstrap.servers": "h:1", "topic": "t",
                                   "queryName": "q", "checkpointLocation": "/c"})
    assert opts.topic == "t"
