"""``jetspark inspect`` and the watermark listener on a real jetkafka → jetjdbc exactly-once query.

The query runs first with Trigger.AvailableNow (then it is stopped), then again on the same
checkpoint with a processing-time trigger (running while it is inspected). The numbers are
checked against the offset log read here independently, the records produced, and a
prepared transaction made by hand.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psycopg
import pytest
from confluent_kafka import Producer

from jetspark.datasources import read_kafka_stream
from jetspark.devtools.cli import main
from jetspark.inspect import inspect
from jetspark.listener import BatchProgress, WatermarkListener
from jetspark.sinks.jdbc.writer import JdbcDataSource

pytestmark = pytest.mark.integration

PARTITIONS = 3
T0 = 1_767_225_600_000  # 2026-01-01 00:00:00 UTC
LAG_MS = 2_000


def produce(bootstrap: str, topic: str, counts: list[int], start: int) -> None:
    """``counts[p]`` records to partition p, 1 s apart from ``start`` seconds; partition 1 40 s behind."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for p, n in enumerate(counts):
        for i in range(n):
            ts = T0 + (start + i) * 1000 - (40_000 if p == 1 else 0)
            producer.produce(topic, value=json.dumps({"i": i}).encode(), partition=p, timestamp=ts)
    assert producer.flush(30) == 0


def offset_log(cp: Path, batch: int) -> dict:
    """The jetkafka offset line of ``offsets/<batch>``, read here without jetspark."""
    lines = (cp / "offsets" / str(batch)).read_text().split("\n")
    assert lines[0] == "v1"
    return json.loads(lines[2])


def logged_batches(cp: Path) -> list[int]:
    return sorted(int(n.name) for n in (cp / "offsets").iterdir() if n.name.isdigit())


def start(spark, bootstrap: str, topic: str, pg_dsn: str, table: str, cp: Path, trigger: dict):
    stream = read_kafka_stream(spark, {
        "kafka.bootstrap.servers": bootstrap, "subscribe": topic, "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "25", "watermark.lag": f"{LAG_MS} milliseconds",
        "watermark.idleTimeout": "0"})  # never idle: no heartbeat batch moves W while we look
    return (stream.where("NOT heartbeat").selectExpr("partition", "offset", "CAST(value AS STRING) AS v")
            .writeStream.format("jetjdbc").option("url", pg_dsn).option("table", table)
            .option("guarantee", "exactly-once").option("createTable", "true")
            .option("checkpointLocation", str(cp)).trigger(**trigger).start())


def check_against_log(report, cp: Path) -> None:
    """Every shown batch's W and per-partition state equal the offset log's."""
    assert [b.batch_id for b in report.checkpoint.batches] == logged_batches(cp)
    for b in report.checkpoint.batches:
        logged = offset_log(cp, b.batch_id)
        assert b.watermark == logged["watermark"]
        (topic, parts), = logged["partitions"].items()
        for p, mark in parts.items():
            got = b.partitions[p]
            assert (got.max_ts, got.wm, got.idle, got.progress_ms) == (
                mark["maxTs"], mark["wm"], mark["idle"], mark["progressMs"])
            assert got.next_offset == logged["offsets"][topic][p]


def test_inspect_a_stopped_and_a_running_query(spark, kafka_bootstrap, kafka_topic, pg_dsn, pg_schema,
                                               tmp_path, capsys):
    spark.dataSource.register(JdbcDataSource)
    topic = kafka_topic(partitions=PARTITIONS, retention_ms="-1")  # 2026-01-01 timestamps stay
    table = f"{pg_schema}.rows"
    cp = tmp_path / "cp"
    seen: list[BatchProgress] = []
    lines: list[str] = []
    listener = WatermarkListener(lines.append, on_batch=seen.append)
    spark.streams.addListener(listener)
    gid = None
    try:
        # -- a stopped query -------------------------------------------------------------------
        produce(kafka_bootstrap, topic, [30, 30, 30], start=0)
        query = start(spark, kafka_bootstrap, topic, pg_dsn, table, cp, {"availableNow": True})
        query.awaitTermination()
        assert query.exception() is None
        assert listener.wait_terminated(query.runId)
        produce(kafka_bootstrap, topic, [5, 7, 9], start=100)  # not read yet: the lag

        query_id = json.loads((cp / "metadata").read_text())["id"]
        gid = f"jetspark:{query_id}:999:0:0"  # a stray of this sink, prepared by hand
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("BEGIN")
            conn.execute(f"PREPARE TRANSACTION '{gid}'")
            prepared_ms = conn.execute(
                "SELECT (extract(epoch FROM prepared) * 1000)::bigint FROM pg_prepared_xacts WHERE gid = %s",
                (gid,)).fetchone()[0]

        report = inspect(str(cp), last=0, kafka=kafka_bootstrap, pg=pg_dsn)
        assert report.errors == []
        check_against_log(report, cp)
        last = logged_batches(cp)[-1]
        assert report.checkpoint.query_id == query_id
        assert report.checkpoint.replay_batch is None and report.checkpoint.last_committed == last
        # lag = the broker's end offset minus the last batch's next offset = the records produced since
        assert {(x.partition, x.offset, x.lag) for x in report.kafka} == {(0, 30, 5), (1, 30, 7), (2, 30, 9)}
        assert [t.gid for t in report.prepared] == [gid]
        assert report.prepared[0].prepared_ms == prepared_ms and report.prepared[0].age_ms >= 0
        assert report.prepared[0].batch_id == 999 and report.sink_id == query_id
        # partition 1 is 40 s behind: it holds W back
        assert report.checkpoint.last.watermark == T0 + 29_000 - 40_000 - LAG_MS
        assert report.to_json()["batches"][-1]["slowest"] == {"partition": "1", "behindMs": 40_000}

        # the listener saw every batch, with the offset log's W and partitions
        assert [b.batch_id for b in seen] == logged_batches(cp)
        for b in seen:
            logged = offset_log(cp, b.batch_id)
            assert b.watermark == logged["watermark"]
            assert {p: m.wm for p, m in b.partitions.items()} == {
                p: m["wm"] for p, m in logged["partitions"][topic].items()}
        assert sum(b.rows for b in seen) == 90 and sum(b.late for b in seen) == 0
        assert len(lines) == len(seen) and "| slowest 1 (40.0 s behind) | idle: -" in lines[-1]

        # the CLI says the same, as JSON
        assert main(["inspect", str(cp), "--kafka", kafka_bootstrap, "--pg", pg_dsn, "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert [k["lag"] for k in data["kafka"]] == [5, 7, 9] and data["prepared"][0]["gid"] == gid

        # a copy whose last batch lost its commit: the batch a restart replays
        copy = tmp_path / "copy"
        shutil.copytree(cp, copy)
        (copy / "commits" / str(last)).unlink()
        assert inspect(str(copy)).checkpoint.replay_batch == last

        # -- a running query ---------------------------------------------------------------------
        seen.clear()
        trigger = {"processingTime": "200 milliseconds"}
        query = start(spark, kafka_bootstrap, topic, pg_dsn, table, cp, trigger)
        try:
            query.processAllAvailable()
            report = inspect(str(cp), last=0, kafka=kafka_bootstrap, pg=pg_dsn)
            assert query.isActive and report.errors == []
            check_against_log(report, cp)
            assert report.checkpoint.last.batch_id > last and report.checkpoint.replay_batch is None
            lags = {(x.partition, x.offset, x.lag) for x in report.kafka}
            assert lags == {(0, 35, 0), (1, 37, 0), (2, 39, 0)}
            assert report.checkpoint.last.watermark == T0 + 106_000 - 40_000 - LAG_MS
            assert [t.gid for t in report.prepared] == [gid]  # the query's own are committed by now
        finally:
            query.stop()
        assert listener.wait_terminated(query.runId)
        assert seen and seen[-1].watermark == report.checkpoint.last.watermark
    finally:
        spark.streams.removeListener(listener)
        if gid is not None:
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                conn.execute(f"ROLLBACK PREPARED '{gid}'")


def test_inspect_a_stopped_jetrabbitmq_query(spark, amqp_url, rabbit_queue, tmp_path):
    from jetspark.datasources.rabbitmq.source import RabbitMQDataSource
    from tests.integration.scripts.rabbitmq_common import publish, wait_no_consumer

    spark.dataSource.register(RabbitMQDataSource)
    n = 25
    stamps = [1_700_000_000 + i for i in range(n)]
    stamps[13] = 1_600_000_000  # far behind the watermark: late, dropped, counted in batch 1
    publish(amqp_url, rabbit_queue, [f"m{i}" for i in range(n)], timestamps=stamps)
    cp, wal = tmp_path / "cp", tmp_path / "wal"
    query = (spark.readStream.format("jetrabbitmq").option("url", amqp_url).option("queue", rabbit_queue)
             .option("walLocation", str(wal)).option("maxMessagesPerTrigger", "10").load()
             .writeStream.format("noop").option("checkpointLocation", str(cp))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None
    assert wait_no_consumer(amqp_url, rabbit_queue) == 0  # the source closed its connection
    publish(amqp_url, rabbit_queue, ["later-1", "later-2"])

    report = inspect(str(cp), last=0, amqp=amqp_url, queue=rabbit_queue, wal_location=str(wal))
    assert report.errors == []
    batches = report.checkpoint.batches
    assert [b.batch_id for b in batches] == logged_batches(cp) == [0, 1, 2]
    for b in batches:
        logged = offset_log(cp, b.batch_id)
        (source,) = b.sources
        assert (source.seq, source.epoch, source.counts) == (logged["seq"], logged["epoch"], logged["counts"])
        assert b.watermark == logged["watermark"]
        assert b.partitions[rabbit_queue].max_ts == logged["partitions"][rabbit_queue]["0"]["maxTs"]
    assert [s.seq for b in batches for s in b.sources] == [10, 20, 25]
    assert [b.late for b in batches] == [0, 1, 0]
    # every batch taken was acked (the run ended asking for more), so the WAL is empty;
    # the queue holds what came after; the lease file names the run's epoch
    assert (report.queue.ready, report.queue.consumers, report.queue.unacked) == (2, 0, None)
    assert (report.wal.wal.files, report.wal.wal_messages) == (0, 0)
    assert report.wal.dedup.files >= 1 and report.wal.holder["epoch"] == batches[-1].sources[0].epoch == 1
    text = report.text()
    assert f"queue {rabbit_queue}: ready 2, unacked - (give the management API URL), consumers 0" in text
    assert "lease  1 files; epoch 1 " in text
