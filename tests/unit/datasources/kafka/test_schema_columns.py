"""A plain jetkafka read declares exactly Spark's Kafka columns; asking for event time adds
``watermark``, ``heartbeat`` and ``late`` (the integration parity test compares with Spark's)."""

from __future__ import annotations

import pytest

from jetspark.datasources.kafka.source import KafkaDataSource

SPARK = ("key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, "
         "timestampType int")
BASE = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}


def test_plain_read_declares_sparks_columns_only():
    assert KafkaDataSource(BASE).schema() == SPARK
    headers = KafkaDataSource({**BASE, "includeHeaders": "true"}).schema()
    assert headers == SPARK + ", headers array<struct<key:string,value:binary>>"


@pytest.mark.parametrize("asked", [{"watermark.lag": "5 seconds"}, {"watermark.heartbeats": "true"},
                                   {"WATERMARK.IDLETIMEOUT": "0"}, {"eventTime.field": "ts"}])
def test_asking_for_event_time_adds_the_watermark_columns(asked):
    schema = KafkaDataSource({**BASE, **asked}).schema()
    assert schema.startswith(SPARK + ", watermark timestamp, heartbeat boolean, late boolean")
