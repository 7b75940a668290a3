"""jetrabbitmq end to end with real RabbitMQ and Spark: exactly once, acks after commit."""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import pytest

from jetspark.datasources.rabbitmq.source import RabbitMQDataSource
from tests.integration.scripts.rabbitmq_common import publish, queue_counts, ready_count, wait_counts

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rspark(spark):
    spark.dataSource.register(RabbitMQDataSource)
    return spark


def _stream(spark, amqp_url, queue, tmp_path, **options):
    reader = (spark.readStream.format("jetrabbitmq").option("url", amqp_url).option("queue", queue)
              .option("walLocation", str(tmp_path / "wal")))
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load()


class Collector:
    """A foreachBatch sink keeping each batch's rows (replaced on a replay), plus a hook."""

    def __init__(self, hook=None) -> None:
        self.batches: dict[int, list] = {}
        self.hook = hook

    def __call__(self, df, batch_id: int) -> None:
        rows = df.collect()
        if self.hook:
            self.hook(batch_id, rows)
        self.batches[batch_id] = rows

    def ids(self) -> list[str]:
        """The data rows' IDs (stubs of late messages left out, as ``where("NOT heartbeat")``)."""
        return [r.message_id for b in sorted(self.batches) for r in self.batches[b] if not r.heartbeat]


def _run(stream, tmp_path, sink, *, available_now=False, until=None):
    writer = stream.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "cp"))
    if available_now:
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
        return query
    query = writer.start()
    try:
        query.processAllAvailable()
        if until:
            until(query)
    finally:
        query.stop()
    assert query.exception() is None
    return query


def _end_offset(query) -> dict:
    end = query.lastProgress["sources"][0]["endOffset"]
    return json.loads(end) if isinstance(end, str) else end


def test_format_module_exposes_default_source():
    path = ROOT / "formats" / "pyspark_jetrabbitmq.py"
    spec = importlib.util.spec_from_file_location("pyspark_jetrabbitmq", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.DefaultSource is RabbitMQDataSource and module.DefaultSource.name() == "jetrabbitmq"


def test_messages_arrive_exactly_once_with_columns_and_late_count(rspark, amqp_url, rabbit_queue, tmp_path):
    n = 45
    ids = [f"m{i}" for i in range(n)]
    stamps = [1_700_000_000 + i for i in range(n)]
    stamps[30] = 1_600_000_000  # far behind the watermark of its batch's start: late, counted
    publish(amqp_url, rabbit_queue, ids, timestamps=stamps, headers=[{"k": i} for i in range(n)])
    sink = Collector()
    query = _run(_stream(rspark, amqp_url, rabbit_queue, tmp_path, maxMessagesPerTrigger=10), tmp_path, sink)
    assert sink.ids() == ids  # late records are kept by default (watermark.lateRecords=keep)
    assert len(sink.batches) == 5
    rows = [r for b in sink.batches.values() for r in b]
    assert not any(r.heartbeat for r in rows)
    late = [r for r in rows if r.late]
    assert [(r.message_id, r.body, r.headers) for r in late] == [("m30", b"body-m30", {"k": "30"})]
    assert late[0].timestamp == datetime.datetime(2020, 9, 13, 12, 26, 40)
    row = sink.batches[0][3]
    assert (row.message_id, row.body, row.routing_key, row.exchange, row.headers, row.redelivered) == (
        "m3", b"body-m3", rabbit_queue, "", {"k": "3"}, False)
    assert row.timestamp == datetime.datetime(2023, 11, 14, 22, 13, 23)  # UTC session time zone
    last = sink.batches[max(sink.batches)][-1]
    assert last.watermark == max(r.timestamp for b in sink.batches.values() for r in b)
    end = _end_offset(query)
    assert end["seq"] == n and end["counts"]["late"] == 1
    assert wait_counts(rabbit_queue, (0, 0)) == (0, 0)


def test_ack_never_precedes_the_commit_log(rspark, amqp_url, rabbit_queue, tmp_path):
    """While batch b runs (before its commit-log entry) every message not in a batch < b
    is still on the broker, ready or unacked; the acks follow the commits."""
    n = 30
    publish(amqp_url, rabbit_queue, [f"m{i}" for i in range(n)])
    seen: list[tuple[int, int, int, bool]] = []
    committed_rows = [0]

    def hold(batch_id, rows):
        ready, unacked = queue_counts(rabbit_queue)
        in_commit_log = (tmp_path / "cp" / "commits" / str(batch_id)).exists()
        seen.append((batch_id, ready + unacked, committed_rows[0], in_commit_log))
        committed_rows[0] += len(rows)

    sink = Collector(hold)
    _run(_stream(rspark, amqp_url, rabbit_queue, tmp_path, maxMessagesPerTrigger=10), tmp_path, sink)
    assert len(seen) == 3
    for batch_id, on_broker, committed_before, in_commit_log in seen:
        assert not in_commit_log
        assert on_broker >= n - committed_before, f"batch {batch_id}: acked before its commit"
    assert seen[-1][1] == 10  # the last batch is held in full while it runs
    assert wait_counts(rabbit_queue, (0, 0)) == (0, 0)  # acked once committed, without commit()
    assert sorted(sink.ids()) == sorted(f"m{i}" for i in range(n))


def test_small_prefetch_does_not_stall(rspark, amqp_url, rabbit_queue, tmp_path):
    """Spark commits one batch late: with prefetch == batch size the source must ack at
    latestOffset(start) or the window stays full after the first batch."""
    publish(amqp_url, rabbit_queue, [f"m{i}" for i in range(23)])
    sink = Collector()
    stream = _stream(rspark, amqp_url, rabbit_queue, tmp_path, maxMessagesPerTrigger=5, prefetch=5)
    _run(stream, tmp_path, sink)
    assert sink.ids() == [f"m{i}" for i in range(23)]


def test_available_now_takes_what_was_in_the_queue_at_start(rspark, amqp_url, rabbit_queue, tmp_path):
    publish(amqp_url, rabbit_queue, [f"m{i}" for i in range(15)])

    def publish_more(batch_id, rows):
        if batch_id == 0:
            publish(amqp_url, rabbit_queue, [f"later{i}" for i in range(7)])

    sink = Collector(publish_more)
    _run(_stream(rspark, amqp_url, rabbit_queue, tmp_path, maxMessagesPerTrigger=5), tmp_path, sink,
         available_now=True)
    assert sink.ids() == [f"m{i}" for i in range(15)]
    assert wait_counts(rabbit_queue, (7, 0)) == (7, 0)
    sink2 = Collector()
    _run(_stream(rspark, amqp_url, rabbit_queue, tmp_path, maxMessagesPerTrigger=5), tmp_path, sink2,
         available_now=True)
    assert sink2.ids() == [f"later{i}" for i in range(7)]
    assert ready_count(amqp_url, rabbit_queue) == 0


def test_idle_driver_keeps_its_connection(rspark, amqp_url, rabbit_queue, tmp_path):
    """heartbeat=2: an idle driver that did not answer heartbeats would lose its channel and
    see its unacked deliveries again (counted as duplicates)."""
    publish(amqp_url, rabbit_queue, [f"a{i}" for i in range(5)])
    sink = Collector()

    def idle_then_more(query):
        time.sleep(6)  # the scenario: three heartbeat intervals with the driver idle
        publish(amqp_url, rabbit_queue, [f"b{i}" for i in range(5)])
        query.processAllAvailable()
        end = _end_offset(query)
        assert end["seq"] == 10 and end["counts"]["duplicates"] == 0

    stream = _stream(rspark, amqp_url + "?heartbeat=2", rabbit_queue, tmp_path)
    _run(stream, tmp_path, sink, until=idle_then_more)
    assert sorted(sink.ids()) == sorted([f"a{i}" for i in range(5)] + [f"b{i}" for i in range(5)])


def test_missing_queue_fails_the_query_clearly(rspark, amqp_url, tmp_path):
    stream = _stream(rspark, amqp_url, "jet_no_such_queue", tmp_path, reconnectTimeout="1s")
    query = stream.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "cp")).start()
    with pytest.raises(Exception, match="does not exist"):
        query.awaitTermination(120)


def test_bad_option_fails_at_load(rspark, amqp_url, rabbit_queue, tmp_path):
    with pytest.raises(Exception, match="onMissingMessageId"):
        _stream(rspark, amqp_url, rabbit_queue, tmp_path, onMissingMessageId="ignore")


def test_environment_has_local_rabbitmq():
    assert os.access("/usr/lib/rabbitmq/bin/rabbitmqctl", os.X_OK)


def test_query_restarted_in_the_same_application_takes_the_lease_back(
    rspark, amqp_url, rabbit_queue, tmp_path
):
    """stop() releases the lease on walLocation: the next run of the query starts at once."""
    seen = Collector()
    for ids in (["a", "b"], ["c"]):
        publish(amqp_url, rabbit_queue, ids)
        query = (_stream(rspark, amqp_url, rabbit_queue, tmp_path).writeStream.foreachBatch(seen)
                 .option("checkpointLocation", str(tmp_path / "cp")).start())
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        assert query.exception() is None
    assert sorted(seen.ids()) == ["a", "b", "c"]
    leases = sorted(p.name for p in (tmp_path / "wal" / "lease").iterdir())
    assert len(leases) == 2  # one per run: the second took over a released lease


def test_available_now_runs_one_after_another_in_one_application(rspark, amqp_url, rabbit_queue, tmp_path):
    """A query that ends by itself (Trigger.AvailableNow) leaves the lease to the next run."""
    seen = Collector()
    for ids in (["a", "b"], ["c"], []):
        publish(amqp_url, rabbit_queue, ids)
        query = _run(_stream(rspark, amqp_url, rabbit_queue, tmp_path), tmp_path, seen, available_now=True)
        assert query.exception() is None
    assert sorted(seen.ids()) == ["a", "b", "c"]


def _deep(levels: int) -> dict:
    table: dict = {"leaf": 1}
    for _ in range(levels):
        table = {"n": table}
    return table


def test_poison_messages_follow_the_malformed_policy_and_the_query_goes_on(
        rspark, amqp_url, rabbit_queue, tmp_path):
    ok, beyond_int64_us = 1_767_225_600, 2**63 // 1_000_000 + 1
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)  # pika encodes nested tables by recursion
    try:
        publish(amqp_url, rabbit_queue, ["deep", "ok", "year-10000", "int64"],  # late ones last
                timestamps=[ok, ok, 253_402_300_800, beyond_int64_us],
                headers=[{"deep": _deep(600)}, None, None, None])
    finally:
        sys.setrecursionlimit(limit)
    sink = Collector()
    query = _run(_stream(rspark, amqp_url, rabbit_queue, tmp_path), tmp_path, sink, available_now=True)
    assert query.exception() is None
    rows = {r.message_id: r for b in sink.batches.values() for r in b if not r.heartbeat}
    # a malformed event time counts as received now: the well-formed older ones come first
    assert sorted(rows) == ["deep", "int64", "ok", "year-10000"]  # none lost
    assert rows["year-10000"].timestamp is None and rows["int64"].timestamp is None
    assert rows["deep"].headers is None and rows["deep"].timestamp is not None
    assert _end_offset(query)["counts"]["malformedEventTime"] == 2
    assert _end_offset(query)["counts"]["malformedHeaders"] == 1
    assert wait_counts(rabbit_queue, (0, 0)) == (0, 0)  # all acked: nothing comes back

    # RabbitMQ itself refuses NaN and infinite doubles (541 INTERNAL_ERROR): a header brings them
    # as text, or as a finite double beyond any time (both covered by unit tests as floats too)
    publish(amqp_url, rabbit_queue, ["ok-2", "nan-2", "inf-2"], timestamps=[ok] * 3,
            headers=[{"ts": ok * 1000}, {"ts": "NaN"}, {"ts": 1e300}])
    sink2 = Collector()
    q2 = _run(_stream(rspark, amqp_url, rabbit_queue, tmp_path / "h", eventTime="header:ts"), tmp_path / "h",
              sink2, available_now=True)
    assert q2.exception() is None and sorted(sink2.ids()) == ["inf-2", "nan-2", "ok-2"]
    assert _end_offset(q2)["counts"]["malformedEventTime"] == 2


def test_a_message_stamped_far_in_the_future_moves_no_watermark(rspark, amqp_url, rabbit_queue, tmp_path):
    """watermark.maxFutureSkew: a producer clock a year ahead stamps one message; it follows
    eventTime.onMalformed (null: the receive time stands in, counted, its timestamp null) and
    the on-time message after it is not late."""
    now_s = time.time_ns() // 1_000_000_000
    on_time = now_s + 600  # ahead of the receive time, well within the skew
    publish(amqp_url, rabbit_queue, ["before", "future", "after"],
            timestamps=[now_s - 60, now_s + 365 * 86_400, on_time])
    sink = Collector()
    stream = _stream(rspark, amqp_url, rabbit_queue, tmp_path,
                     **{"watermark.maxFutureSkew": "1 hour", "watermark.lateRecords": "keep"})
    query = _run(stream, tmp_path, sink, available_now=True)
    assert query.exception() is None
    rows = {r.message_id: r for b in sink.batches.values() for r in b if not r.heartbeat}
    assert sorted(rows) == ["after", "before", "future"] and not any(r.late for r in rows.values())
    assert rows["future"].timestamp is None and rows["after"].timestamp is not None
    end = _end_offset(query)
    assert end["counts"]["malformedEventTime"] == 1 and end["counts"]["late"] == 0
    assert end["watermark"] == on_time * 1000 == end["partitions"][rabbit_queue]["0"]["maxTs"]
    assert wait_counts(rabbit_queue, (0, 0)) == (0, 0)  # all acked
