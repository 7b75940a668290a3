"""jetkafka's per-partition watermarks with real data (docs/design.md, "Watermarks"): skew,
idleness, restart, late."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from pyspark.sql import functions as F
from pyspark_jetkafka import DefaultSource  # the one jetkafka format: source and sink

from jetspark.datasources import read_kafka_stream
from tests.integration.scripts.jetkafka_common import BASE_TS, numbered, produce

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def jk(spark):
    spark.dataSource.register(DefaultSource)
    return spark


def options(bootstrap, topic, **extra):
    return {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "startingOffsets": "earliest",
            **{k: str(v) for k, v in extra.items()}}


def collect_available_now(df, checkpoint):
    rows: list = []
    query = (df.writeStream.foreachBatch(lambda b, _i: rows.extend(b.collect()))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    if not query.awaitTermination(180):
        status, last = query.status, query.lastProgress
        query.stop()
        raise AssertionError(f"query did not finish in 180 s: status {status}, last progress {last}")
    assert query.exception() is None
    return query, rows


def end_offsets(query):
    return [json.loads(p["sources"][0]["endOffset"]) for p in query.recentProgress]


def dropped_by_watermark(query):
    return sum(op.get("numRowsDroppedByWatermark", 0) for p in query.recentProgress
               for op in p["stateOperators"])


def test_skewed_partition_is_kept_by_jetkafka_but_dropped_by_sparks_watermark(jk, kafka_bootstrap,
                                                                             kafka_topic, tmp_path):
    """Partition 1 runs 60 s behind partition 0 in event time; lag 10 s for both watermarks."""
    topic = kafka_topic(2)
    produce(kafka_bootstrap, topic, numbered(0, 0, 40, ts0=BASE_TS + 60_000) + numbered(1, 0, 40))
    # jetkafka: W = min over partitions, so the lagging partition holds it back.
    ours = read_kafka_stream(jk, options(kafka_bootstrap, topic, maxOffsetsPerTrigger=20,
                                         **{"watermark.lag": "10 seconds"}))
    ours = ours.where(~F.col("heartbeat")).dropDuplicatesWithinWatermark(["key"])
    q_ours, rows_ours = collect_available_now(ours, tmp_path / "ours")
    # Spark's built-in watermark on the event-time column, same lag, same rows and batches.
    spark_wm = (jk.readStream.format("jetkafka").options(**options(kafka_bootstrap, topic,
                                                                   maxOffsetsPerTrigger=20)).load()
                .withWatermark("timestamp", "10 seconds").dropDuplicatesWithinWatermark(["key"]))
    q_spark, rows_spark = collect_available_now(spark_wm, tmp_path / "spark")

    assert len([p for p in q_ours.recentProgress if p["numInputRows"]]) >= 4
    assert sorted(r.key for r in rows_ours) == sorted(k for _, k, _, _ in
                                                     numbered(0, 0, 40) + numbered(1, 0, 40))
    assert dropped_by_watermark(q_ours) == 0
    late = [p["observedMetrics"]["jetkafka"]["lateRecords"] for p in q_ours.recentProgress
            if "jetkafka" in p.get("observedMetrics", {})]
    assert late and sum(late) == 0

    kept = {(r.partition, r.offset) for r in rows_spark}
    assert all((0, i) in kept for i in range(40))  # the leading partition is complete
    lost = [i for i in range(40) if (1, i) not in kept]
    assert len(lost) >= 20 and dropped_by_watermark(q_spark) == len(lost)


def test_idle_partition_stops_holding_the_watermark_back(jk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(2)
    produce(kafka_bootstrap, topic, numbered(0, 0, 10))
    # The idle timeout is wall-clock time from the query's start: long enough that the first
    # batch is planned before partition 1 turns idle, also on a loaded 2-core CI machine.
    df = read_kafka_stream(jk, options(kafka_bootstrap, topic, **{"watermark.idleTimeout": "4 seconds"}))
    query = (df.writeStream.foreachBatch(lambda b, _i: b.collect())
             .option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        query.processAllAvailable()
        first = end_offsets(query)[0]
        assert first["watermark"] is None  # partition 1 has no data and is not idle yet
        assert first["partitions"][topic]["1"]["idle"] is False
        time.sleep(4.5)  # the idle timeout has to pass in wall-clock time
        produce(kafka_bootstrap, topic, numbered(0, 10, 5))
        query.processAllAvailable()
        moved = next(e for e in end_offsets(query) if e["offsets"][topic]["0"] == 15)
        assert moved["partitions"][topic]["1"]["idle"] is True
        assert moved["partitions"][topic]["0"]["idle"] is False
        assert moved["watermark"] == BASE_TS + 14_000 == moved["partitions"][topic]["0"]["wm"]
        # partition 1 gets data again: it rejoins, W does not go back
        produce(kafka_bootstrap, topic, numbered(1, 0, 3, ts0=BASE_TS + 20_000))
        query.processAllAvailable()
        rejoined = next(e for e in end_offsets(query) if e["offsets"][topic].get("1", 0) == 3)
        parts = rejoined["partitions"][topic]
        assert parts["1"]["idle"] is False and parts["1"]["wm"] == BASE_TS + 22_000
        # W never goes back, and is the minimum over the partitions not idle (partition 0 may
        # have turned idle meanwhile, then W follows partition 1).
        assert rejoined["watermark"] >= BASE_TS + 14_000
        assert rejoined["watermark"] == min(m["wm"] for m in parts.values() if not m["idle"])
    finally:
        query.stop()
    assert query.exception() is None


def test_heartbeat_moves_w_without_data_when_all_idle_and_asked(jk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(1)
    produce(kafka_bootstrap, topic, numbered(0, 0, 5))
    rows: list = []
    df = read_kafka_stream(jk, options(kafka_bootstrap, topic, **{"watermark.idleTimeout": "1 second",
                                                                  "watermark.advanceWhenIdle": "true"}))
    query = (df.writeStream.foreachBatch(lambda b, _i: rows.extend(b.collect()))
             .option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        query.processAllAvailable()
        time.sleep(2.5)  # idle after 1 s, then W follows the wall clock in 1 s steps
        query.processAllAvailable()
    finally:
        query.stop()
    beats = [r for r in rows if r.heartbeat]
    assert beats and all(r.value is None and r.topic is None and not r.late for r in beats)
    assert min(int(r.watermark.timestamp() * 1000) for r in beats) >= BASE_TS + 4_000 + 1_000
    assert len([r for r in rows if not r.heartbeat]) == 5


def test_watermark_never_goes_back_across_restart(jk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(2)
    produce(kafka_bootstrap, topic, numbered(0, 0, 10, ts0=BASE_TS + 100_000) + numbered(1, 0, 10))
    checkpoint = tmp_path / "ck"
    opts = options(kafka_bootstrap, topic, **{"watermark.lag": "2 seconds"})
    q1, _ = collect_available_now(read_kafka_stream(jk, opts), checkpoint)
    w_before = end_offsets(q1)[-1]["watermark"]
    assert w_before == BASE_TS + 9_000 - 2_000
    # After the restart only partition 1 moves, with older records: a tracker that forgot its
    # state would compute W from them alone; ours resumes from the offset log.
    produce(kafka_bootstrap, topic, numbered(1, 10, 2, ts0=BASE_TS - 20_000))
    q2, rows = collect_available_now(read_kafka_stream(jk, opts), checkpoint)
    after = end_offsets(q2)
    assert after and all(e["watermark"] >= w_before for e in after)
    assert after[-1]["partitions"][topic]["0"]["maxTs"] == BASE_TS + 109_000  # state carried over
    late = sorted(r.offset for r in rows if r.late)
    assert late == [10, 11]
    ws = [int(r.watermark.timestamp() * 1000) for r in rows]
    assert ws and min(ws) >= w_before


@pytest.mark.parametrize("policy", ["drop", "keep"])
def test_late_records_are_judged_against_w_and_counted(jk, kafka_bootstrap, kafka_topic, tmp_path, policy):
    """Out of order within the partition is on time until W passes it (Jet's rule): the first
    run's 15 follows 20 and is delivered whole; in the second run W is 30 (lag 0), so 15 and 5
    are late — flagged and kept by default, stubs with ``drop``."""
    topic = kafka_topic(1)
    first, second = [10, 20, 15, 30], [15, 5, 31]
    produce(kafka_bootstrap, topic, [(0, f"k{i}".encode(), f"v{i}".encode(), BASE_TS + s * 1000)
                                     for i, s in enumerate(first)])
    opts = options(kafka_bootstrap, topic, **{"watermark.lateRecords": policy})
    name = f"m_{uuid.uuid4().hex[:6]}"
    _, rows1 = collect_available_now(read_kafka_stream(jk, opts, metrics_name=name), tmp_path / "ck")
    assert not any(r.late for r in rows1) and sorted(r.key for r in rows1) == [b"k0", b"k1", b"k2", b"k3"]
    produce(kafka_bootstrap, topic, [(0, f"k{i}".encode(), f"v{i}".encode(), BASE_TS + s * 1000)
                                     for i, s in enumerate(second, start=len(first))])
    query, rows = collect_available_now(read_kafka_stream(jk, opts, metrics_name=name), tmp_path / "ck")
    metrics = query.lastProgress["observedMetrics"][name]
    assert metrics["lateRecords"] == 2
    late = sorted((r.offset, r.key, r.heartbeat) for r in rows if r.late)
    if policy == "drop":  # payload dropped, the stub is a heartbeat row that can be counted
        assert late == [(4, None, True), (5, None, True)] and metrics["records"] == 1
    else:
        assert late == [(4, b"k4", False), (5, b"k5", False)] and metrics["records"] == 3


def test_transaction_markers_and_aborted_records_do_not_move_max_ts(jk, kafka_bootstrap, kafka_topic,
                                                                     tmp_path):
    """A commit marker carries the broker's wall-clock time (here two hours after the records),
    an aborted record an event time of its own: neither is a record the query reads, so
    neither may become the partition's ``maxTs`` (else the next on-time records turn late)."""
    topic = kafka_topic(1)
    tid = f"jk-{uuid.uuid4().hex[:6]}"
    produce(kafka_bootstrap, topic, numbered(0, 0, 5), transactional_id=tid)
    produce(kafka_bootstrap, topic, numbered(0, 5, 1, ts0=BASE_TS + 3_600_000, tag="a"),
            transactional_id=tid, abort=True)
    produce(kafka_bootstrap, topic, numbered(0, 5, 5), transactional_id=tid)
    checkpoint = tmp_path / "ck"
    opts = options(kafka_bootstrap, topic, **{"watermark.lag": "1 second"})
    q1, rows1 = collect_available_now(read_kafka_stream(jk, opts), checkpoint)
    first = end_offsets(q1)[-1]
    assert first["partitions"][topic]["0"]["maxTs"] == BASE_TS + 9_000
    assert first["watermark"] == BASE_TS + 8_000
    produce(kafka_bootstrap, topic, numbered(0, 10, 5), transactional_id=tid)
    q2, rows2 = collect_available_now(read_kafka_stream(jk, opts), checkpoint)
    assert end_offsets(q2)[-1]["partitions"][topic]["0"]["maxTs"] == BASE_TS + 14_000
    data = [r for r in rows1 + rows2 if not r.heartbeat]
    assert sorted(r.key for r in data) == sorted(k for _, k, _, _ in numbered(0, 0, 15))
    assert not any(r.late for r in rows1 + rows2)
