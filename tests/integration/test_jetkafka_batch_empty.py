"""A batch read with nothing to read returns no rows (Spark then plans one stand-in partition)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_batch_read_of_an_empty_topic_is_empty(spark, kafka_bootstrap, kafka_topic):
    topic = kafka_topic(partitions=2)
    df = (spark.read.format("jetkafka").option("kafka.bootstrap.servers", kafka_bootstrap)
          .option("subscribe", topic).load())
    assert df.count() == 0
