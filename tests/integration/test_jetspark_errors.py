"""Catching jetspark's errors as a user does, through Spark's wrapping: an OptionError raised
while Spark plans a batch read and a streaming query, and a worker's error while it reads,
found by :func:`jetspark.errors.jetspark_error_of` in the exception Spark raised."""

from __future__ import annotations

import json

import pytest
from pyspark.errors import PySparkException, StreamingQueryException
from pyspark_jetkafka import DefaultSource

from jetspark.datasources.malformed import MalformedEventTimeError
from jetspark.errors import JetsparkError, OptionError, is_jetspark_error, jetspark_error_of
from tests.integration.scripts.jetkafka_common import BASE_TS, produce

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def jk(spark):
    spark.dataSource.register(DefaultSource)
    return spark


def test_an_option_error_of_a_batch_read_is_caught_through_sparks_wrapping(jk, kafka_bootstrap):
    df = (jk.read.format("jetkafka").option("kafka.bootstrap.servers", kafka_bootstrap)
          .option("subscribe", "t").option("bogus", "1").load())
    with pytest.raises(PySparkException) as caught:  # what Spark raises: not an OptionError
        df.collect()
    assert not isinstance(caught.value, JetsparkError)
    err = jetspark_error_of(caught.value)
    assert isinstance(err, OptionError) and err.option == "bogus" and err.code == "JETSPARK_OPTION_ERROR"
    assert "subscribe" in err.accepted and err.spark_exception is caught.value
    assert is_jetspark_error(caught.value, OptionError)


def test_an_option_error_of_a_streaming_query_is_caught_through_sparks_wrapping(jk, kafka_bootstrap,
                                                                                tmp_path):
    df = (jk.readStream.format("jetkafka").option("kafka.bootstrap.servers", kafka_bootstrap)
          .option("subscribe", "t").option("watermark.lag", "ten seconds").load())
    query = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck")).start()
    try:
        with pytest.raises(StreamingQueryException) as caught:
            query.processAllAvailable()
    finally:
        query.stop()
    for raised in (caught.value, query.exception()):
        err = jetspark_error_of(raised, OptionError)
        assert err is not None and (err.option, err.value) == ("watermark.lag", "ten seconds"), raised
        assert err.getCondition() == "JETSPARK_OPTION_ERROR"


def test_a_workers_error_while_reading_is_caught_through_sparks_wrapping(jk, kafka_bootstrap, kafka_topic):
    topic = kafka_topic(1)
    produce(kafka_bootstrap, topic, [(0, b"k", json.dumps({"ts": "soon"}).encode(), BASE_TS)])
    df = (jk.read.format("jetkafka").option("kafka.bootstrap.servers", kafka_bootstrap)
          .option("subscribe", topic).option("eventTime.field", "ts").load())
    with pytest.raises(PySparkException) as caught:
        df.collect()
    err = jetspark_error_of(caught.value)
    assert type(err) is MalformedEventTimeError and "eventTime.onMalformed" in str(err), caught.value
    assert not is_jetspark_error(caught.value, OptionError)
