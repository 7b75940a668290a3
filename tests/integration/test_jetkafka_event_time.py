"""jetkafka with the event time read from a JSON field of the value (``eventTime.field``)."""

from __future__ import annotations

import contextlib
import json

import pytest
from pyspark.errors import StreamingQueryException

from jetspark.datasources import read_kafka_stream
from jetspark.datasources.kafka_source import KafkaDataSource
from tests.integration.scripts.jetkafka_common import BASE_TS, produce

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def jk(spark):
    spark.dataSource.register(KafkaDataSource)
    return spark


def _records(partition: int, stamps: list, kafka_ts: int) -> list[tuple]:
    """Values carry the event time in ``meta.ts``; every Kafka timestamp is ``kafka_ts``."""
    out = []
    for i, ts in enumerate(stamps):
        value = ts if isinstance(ts, bytes) else json.dumps({"id": i, "meta": {"ts": ts}}).encode()
        out.append((partition, f"k{partition}-{i}".encode(), value, kafka_ts))
    return out


def _run(jk, bootstrap, topic, tmp_path, **extra):
    opts = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "startingOffsets": "earliest",
            "eventTime.field": "meta.ts", "watermark.lag": "1 second", **extra}
    rows: list = []
    query = (read_kafka_stream(jk, opts).writeStream.foreachBatch(lambda b, _i: rows.extend(b.collect()))
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    with contextlib.suppress(StreamingQueryException):  # a failed query: see query.exception()
        query.awaitTermination(120)
    return query, rows


def test_watermark_and_late_records_follow_the_payload_time(jk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(1)
    # Kafka timestamps say "all at once"; the payload says otherwise, and record 2 is late.
    stamps = [BASE_TS + s * 1000 for s in (10, 20, 5, 30)]
    produce(kafka_bootstrap, topic, _records(0, stamps, kafka_ts=BASE_TS))
    query, rows = _run(jk, kafka_bootstrap, topic, tmp_path, **{"watermark.lateRecords": "keep"})
    assert query.exception() is None
    end = json.loads(query.lastProgress["sources"][0]["endOffset"])
    assert end["partitions"][topic]["0"]["maxTs"] == BASE_TS + 30_000
    assert end["watermark"] == BASE_TS + 29_000
    data = sorted((r.offset, int(r.eventTime.timestamp() * 1000), r.late) for r in rows if not r.heartbeat)
    assert data == [(0, stamps[0], False), (1, stamps[1], False), (2, stamps[2], True), (3, stamps[3], False)]
    assert all(int(r.timestamp.timestamp() * 1000) == BASE_TS for r in rows if not r.heartbeat)


def test_malformed_event_time_fails_by_default_naming_the_record(jk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(1)
    produce(kafka_bootstrap, topic, _records(0, [BASE_TS, b'{"meta": {"ts": "soon"}}'], kafka_ts=BASE_TS))
    query, _ = _run(jk, kafka_bootstrap, topic, tmp_path)
    error = str(query.exception())
    assert "offset 1" in error and "meta.ts" in error and "eventTime.onMalformed" in error


def test_malformed_event_time_null_policy_keeps_the_record(jk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(1)
    stamps = [BASE_TS + 1_000, b"not json", BASE_TS + 3_000]
    produce(kafka_bootstrap, topic, _records(0, stamps, kafka_ts=BASE_TS + 2_000))
    query, rows = _run(jk, kafka_bootstrap, topic, tmp_path, **{"eventTime.onMalformed": "null"})
    assert query.exception() is None
    data = sorted((r.offset, r.eventTime is None, r.value) for r in rows if not r.heartbeat)
    assert [d[:2] for d in data] == [(0, False), (1, True), (2, False)] and data[1][2] == b"not json"
    end = json.loads(query.lastProgress["sources"][0]["endOffset"])
    assert end["partitions"][topic]["0"]["maxTs"] == BASE_TS + 3_000
