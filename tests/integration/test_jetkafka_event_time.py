"""jetkafka with the event time read from a JSON field of the value (``eventTime.field``)."""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.errors import StreamingQueryException
from pyspark_jetkafka import DefaultSource  # the one jetkafka format: source and sink

from jetspark.datasources import read_kafka_stream
from jetspark.datasources.kafka import native as kafka_native
from jetspark.datasources.kafka.event_time import EventTimeSpec
from jetspark.datasources.kafka.options import KafkaSourceOptions
from jetspark.datasources.kafka.read import RangeSpec, ReadSettings, read_range
from jetspark.datasources.kafka.scan import scan_max_timestamps
from jetspark.datasources.kafka.source import KafkaStreamReader
from tests.integration.scripts.jetkafka_common import BASE_TS, produce
from tests.unit.datasources.kafka.test_event_time import ISO_FORMS

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def jk(spark):
    spark.dataSource.register(DefaultSource)
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
    # Kafka timestamps say "all at once"; the payload says otherwise: after the first run W is
    # 19 s (lag 1 s), so record 2 (5 s) of the second run is late, record 3 (30 s) is not.
    stamps = [BASE_TS + s * 1000 for s in (10, 20, 5, 30)]
    records = _records(0, stamps, kafka_ts=BASE_TS)
    produce(kafka_bootstrap, topic, records[:2])
    first, rows = _run(jk, kafka_bootstrap, topic, tmp_path, **{"watermark.lateRecords": "keep"})
    assert first.exception() is None
    produce(kafka_bootstrap, topic, records[2:])
    query, more = _run(jk, kafka_bootstrap, topic, tmp_path, **{"watermark.lateRecords": "keep"})
    assert query.exception() is None
    rows += more
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
    assert re.search(r"\boffset 1 of topic\b", error), error
    assert "'meta.ts'" in error and "eventTime.onMalformed" in error


def test_malformed_event_time_null_policy_keeps_the_record(jk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(1)
    too_deep = b'{"meta": {"ts": ' + b"[" * 5000 + b"]" * 5000 + b"}}"  # RecursionError in json.loads
    stamps = [BASE_TS + 1_000, b"not json", too_deep, BASE_TS + 3_000]
    produce(kafka_bootstrap, topic, _records(0, stamps, kafka_ts=BASE_TS + 2_000))
    query, rows = _run(jk, kafka_bootstrap, topic, tmp_path, **{"eventTime.onMalformed": "null"})
    assert query.exception() is None
    data = sorted((r.offset, r.eventTime is None, r.value) for r in rows if not r.heartbeat)
    assert [d[:2] for d in data] == [(0, False), (1, True), (2, True), (3, False)]
    assert data[1][2] == b"not json" and data[2][2] == too_deep
    end = json.loads(query.lastProgress["sources"][0]["endOffset"])
    assert end["partitions"][topic]["0"]["maxTs"] == BASE_TS + 3_000


@pytest.mark.parametrize("native", [True, False], ids=["native", "confluent"])
def test_iso8601_forms_of_the_readme_on_the_reader_and_the_drivers_scan(native, kafka_bootstrap, kafka_topic):
    """Every form README.md lists, read by one reader and by the driver's max-timestamp scan.

    Partition 0 holds all forms (chunks of 7 records, some with an impossible date that
    sends the chunk record by record); partition i + 1 holds form i alone, so the scan's
    per-partition maximum is that form's event time (or, malformed, its Kafka timestamp).
    """
    assert kafka_native.AVAILABLE or not native, f"native reader not built: {kafka_native.IMPORT_ERROR}"
    topic = kafka_topic(len(ISO_FORMS) + 1)
    kafka_ts = [BASE_TS + i for i in range(len(ISO_FORMS))]
    records = []
    for partition in (0, *range(1, len(ISO_FORMS) + 1)):
        forms = enumerate(ISO_FORMS) if partition == 0 else [(partition - 1, ISO_FORMS[partition - 1])]
        records += [(partition, None, json.dumps({"meta": {"t": text}}).encode(), kafka_ts[i])
                    for i, (text, _) in forms]
    produce(kafka_bootstrap, topic, records)
    spec = EventTimeSpec(("meta", "t"), "iso8601", "null")
    settings = ReadSettings({"bootstrap.servers": kafka_bootstrap, "group.id": f"iso-{uuid.uuid4().hex[:8]}"},
                            include_headers=False, keep_late=True, fail_on_data_loss=True,
                            poll_timeout_ms=30_000, chunk_rows=7, event_time=spec)
    expected = [e for _, e in ISO_FORMS]
    ts_us = pa.timestamp("us", tz="UTC")

    def read(partition: int, n: int) -> list[int | None]:
        rng = RangeSpec(topic, partition, 0, n, None, None, None)
        table = pa.Table.from_batches(list(read_range(settings, rng, native=native)))
        assert table["offset"].to_pylist() == list(range(n)) and table.schema.field("eventTime").type == ts_us
        return table["eventTime"].cast(pa.int64()).to_pylist()

    assert read(0, len(ISO_FORMS)) == expected
    assert [read(i + 1, 1)[0] for i in range(len(ISO_FORMS))] == expected

    scanned = scan_max_timestamps(settings.kafka, {(topic, p): (0, 1) for p in range(1, len(ISO_FORMS) + 1)},
                                  fail_on_data_loss=True, poll_timeout_ms=30_000, event_time=spec)
    assert [scanned[(topic, i + 1)] for i in range(len(ISO_FORMS))] == \
        [kafka_ts[i] if e is None else e // 1000 for i, e in enumerate(expected)]


def _logged_offset(checkpoint: Path, batch: int) -> dict:
    """The source offset Spark logged for ``batch`` (``offsets/<batch>``: version, metadata, offset)."""
    lines = (checkpoint / "offsets" / str(batch)).read_text().split("\n")
    assert lines[0] == "v1"
    return json.loads(lines[2])


def test_a_kafka_timestamp_beyond_the_cut_off_moves_no_watermark_and_a_replay_decides_the_same(
        jk, kafka_bootstrap, kafka_topic, tmp_path):
    """watermark.maxFutureSkew on Kafka timestamps, the broker's ListOffsets path: the future
    record's timestamp is the partition's greatest, so the driver must scan the range instead;
    under eventTime.onMalformed=null the record stays with a null timestamp, and the on-time
    records after it are not late. Replanning the logged batch with a clock that would admit
    the record decides the same: the cut-off comes from the offset."""
    topic = kafka_topic(1)
    now = time.time_ns() // 1_000_000
    future = now + 30 * 60_000  # a producer clock 30 min ahead (the broker refuses more than 1 h)
    opts = {"kafka.bootstrap.servers": kafka_bootstrap, "subscribe": topic, "startingOffsets": "earliest",
            "watermark.maxFutureSkew": "1 minute", "eventTime.onMalformed": "null",
            "watermark.lateRecords": "keep"}
    checkpoint = tmp_path / "ck"
    rows: dict[int, list] = {}

    def run() -> None:
        query = (read_kafka_stream(jk, opts).writeStream
                 .foreachBatch(lambda b, i: rows.__setitem__(i, [r for r in b.collect() if not r.heartbeat]))
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert query.exception() is None

    produce(kafka_bootstrap, topic, [(0, b"a", b"on time", now - 60_000)])
    run()
    later = [(0, b"f", b"from the future", future), (0, b"b", b"on time", now - 50_000),
             (0, b"c", b"on time", now - 40_000)]
    produce(kafka_bootstrap, topic, later)
    run()
    batch = next(i for i, batch_rows in rows.items() if any(r.offset == 1 for r in batch_rows))
    seen = [(r.offset, r.timestamp is None, r.late) for r in rows[batch]]
    assert seen == [(1, True, False), (2, False, False), (3, False, False)]
    end = _logged_offset(checkpoint, batch)
    assert end["partitions"][topic]["0"]["maxTs"] == now - 40_000 == end["watermark"]
    assert now < end["futureCutoff"] < future

    replayer = KafkaStreamReader(KafkaSourceOptions.parse(opts, streaming=True), clock=lambda: future)
    try:
        tasks = replayer.partitions(_logged_offset(checkpoint, batch - 1), end)
        table = pa.Table.from_batches([b for task in tasks for b in replayer.read(task)])
    finally:
        replayer.stop()
    assert list(zip(table["offset"].to_pylist(), [t is None for t in table["timestamp"].to_pylist()],
                    table["late"].to_pylist(), strict=True)) == seen


def test_a_payload_event_time_beyond_the_cut_off_fails_by_default(jk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(1)
    now = time.time_ns() // 1_000_000
    produce(kafka_bootstrap, topic, _records(0, [now - 1_000, now + 365 * 86_400_000], kafka_ts=now))
    query, _ = _run(jk, kafka_bootstrap, topic, tmp_path, **{"watermark.maxFutureSkew": "1 hour"})
    error = str(query.exception())
    assert re.search(r"\boffset 1 of topic\b", error), error
    assert "'meta.ts'" in error and "watermark.maxFutureSkew" in error and "eventTime.onMalformed" in error
