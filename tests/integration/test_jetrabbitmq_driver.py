"""The acknowledging-queue protocol on real RabbitMQ, driven directly (no Spark; fast)."""

from __future__ import annotations

import time

import pytest

from jetspark.datasources.malformed import MalformedEventTimeError
from jetspark.datasources.rabbitmq.amqp import HEADER_COST, READ_CHUNK
from jetspark.datasources.rabbitmq.consumer import QueueConsumer, QueueError
from jetspark.datasources.rabbitmq.driver import MissingMessageIdError, QueueDriver, WalGapError
from jetspark.datasources.rabbitmq.options import RabbitMQOptions
from jetspark.datasources.rabbitmq.wal import WalRange
from tests.integration.scripts.rabbitmq_common import publish, wait_counts

pytestmark = pytest.mark.integration


def _driver(amqp_url, queue, tmp_path, **extra) -> QueueDriver:
    raw = {"url": amqp_url, "queue": queue, "walLocation": str(tmp_path / "wal"), **extra}
    return QueueDriver(RabbitMQOptions.parse(raw))


def _ids(driver: QueueDriver, start: dict, end: dict) -> list[str]:
    ranges = driver.plan(start, end)
    return [i for r in ranges for i in driver.wal.read(r, ["message_id"]).column(0).to_pylist()]


def test_acks_only_after_commit_and_dedups_redeliveries(amqp_url, rabbit_queue, tmp_path):
    publish(amqp_url, rabbit_queue, [f"m{i}" for i in range(10)])
    d = _driver(amqp_url, rabbit_queue, tmp_path, maxMessagesPerTrigger="4")
    o0 = d.initial_offset()
    o1 = d.latest_offset(o0, 4)
    assert o1["seq"] == 4 and _ids(d, o0, o1) == ["m0", "m1", "m2", "m3"]
    assert wait_counts(rabbit_queue, (0, 10)) == (0, 10)  # all prefetched, nothing acked
    o2 = d.latest_offset(o1, 4)  # Spark asks for the next batch: batch 1 is committed
    assert wait_counts(rabbit_queue, (0, 6)) == (0, 6)
    # crash: batch [4, 8) is in the WAL and in Spark's offset log but not committed
    d.stop()
    assert wait_counts(rabbit_queue, (6, 0)) == (6, 0)
    d2 = _driver(amqp_url, rabbit_queue, tmp_path, maxMessagesPerTrigger="4")
    assert _ids(d2, o1, o2) == ["m4", "m5", "m6", "m7"]  # the batch replays from the WAL
    o3 = d2.latest_offset(o2, 4)  # batch 2 committed: its redeliveries are duplicates
    assert _ids(d2, o2, o3) == ["m8", "m9"]
    assert o3["counts"]["duplicates"] == 4
    d2.commit_through(o3["seq"])
    assert wait_counts(rabbit_queue, (0, 0)) == (0, 0)
    assert d2.wal.ranges() == []
    d2.stop()


def test_no_data_is_never_said_while_the_queue_holds_messages_for_us(amqp_url, rabbit_queue, tmp_path):
    """processAllAvailable() ends at the first "no data": with a poll timeout of 1 ms, every
    call still returns messages while the queue holds ready ones the consumer has room for."""
    publish(amqp_url, rabbit_queue, [f"m{i}" for i in range(7)])
    d = _driver(amqp_url, rabbit_queue, tmp_path, pollTimeout="1ms", maxMessagesPerTrigger="3")
    offset = d.initial_offset()  # the first call connects: its deliveries are not there yet
    taken = []
    while len(taken) < 7:
        end = d.latest_offset(offset, 3)
        assert end["seq"] > offset["seq"], f"no data said with {7 - len(taken)} messages in the queue"
        taken += _ids(d, offset, end)
        offset = end
    assert taken == [f"m{i}" for i in range(7)]
    assert d.latest_offset(offset, 3)["seq"] == 7  # the queue is empty now: no data, at once
    d.stop()


def test_orphan_wal_batch_is_discarded_and_rebatched(amqp_url, rabbit_queue, tmp_path):
    publish(amqp_url, rabbit_queue, ["a", "b", "c"])
    d = _driver(amqp_url, rabbit_queue, tmp_path)
    o0 = d.initial_offset()
    d.latest_offset(o0, None)  # WAL written; crash before Spark logs the offset
    d.stop()
    d2 = _driver(amqp_url, rabbit_queue, tmp_path)
    assert d2.wal.ranges() == [WalRange(0, 3, d2.lease.epoch - 1)]
    o1 = d2.latest_offset(o0, None)
    assert o1["seq"] == 3 and sorted(_ids(d2, o0, o1)) == ["a", "b", "c"]
    assert o1["counts"]["duplicates"] == 0
    d2.latest_offset(o1, None)
    assert wait_counts(rabbit_queue, (0, 0)) == (0, 0)
    d2.stop()


def test_same_message_id_counts_once_within_retention(amqp_url, rabbit_queue, tmp_path):
    publish(amqp_url, rabbit_queue, ["x", "y", "x"])
    d = _driver(amqp_url, rabbit_queue, tmp_path)
    o1 = d.latest_offset(d.initial_offset(), None)
    assert o1["seq"] == 2
    publish(amqp_url, rabbit_queue, ["y", "z"])
    o2 = d.latest_offset(o1, None)
    assert _ids(d, o1, o2) == ["z"] and o2["counts"]["duplicates"] == 2
    d.stop()


def test_duplicate_after_retention_is_new(amqp_url, rabbit_queue, tmp_path):
    clock = [1_000_000]
    raw = {"url": amqp_url, "queue": rabbit_queue, "walLocation": str(tmp_path), "dedupRetention": "1 minute"}
    d = QueueDriver(RabbitMQOptions.parse(raw), clock=lambda: clock[0])
    publish(amqp_url, rabbit_queue, ["x"])
    o1 = d.latest_offset(d.initial_offset(), None)
    d.latest_offset(o1, None)  # commits "x"
    clock[0] += 61_000
    publish(amqp_url, rabbit_queue, ["x"])
    o2 = d.latest_offset(o1, None)
    assert _ids(d, o1, o2) == ["x"]
    d.stop()


@pytest.mark.parametrize("policy", ["fail", "hash", "drop"])
def test_missing_message_id_policy(amqp_url, rabbit_queue, tmp_path, policy):
    publish(amqp_url, rabbit_queue, ["a", None, None, "b"], bodies=[b"1", b"same", b"same", b"2"])
    d = _driver(amqp_url, rabbit_queue, tmp_path, onMissingMessageId=policy)
    o0 = d.initial_offset()
    if policy == "fail":
        with pytest.raises(MissingMessageIdError, match="onMissingMessageId"):
            d.latest_offset(o0, None)
        d.stop()
        assert wait_counts(rabbit_queue, (4, 0)) == (4, 0)  # nothing lost
        return
    o1 = d.latest_offset(o0, None)
    d.latest_offset(o1, None)
    ids = _ids(d, o0, o1) if d.wal.ranges() else None
    counts = o1["counts"]
    if policy == "hash":
        assert o1["seq"] == 3 and counts["missingIdHashed"] == 2 and counts["duplicates"] == 1
    else:
        assert o1["seq"] == 2 and counts["missingIdDropped"] == 2
    assert ids is None  # committed and dropped from the WAL
    assert wait_counts(rabbit_queue, (0, 0)) == (0, 0)
    d.stop()


def test_header_message_id_and_event_time(amqp_url, rabbit_queue, tmp_path):
    publish(amqp_url, rabbit_queue, [None, None],
            headers=[{"x-id": "h1", "ts": 5_000}, {"x-id": "h2", "ts": 9_000}])
    d = _driver(amqp_url, rabbit_queue, tmp_path, messageId="header:x-id", eventTime="header:ts",
                **{"watermark.lag": "1 second"})
    o0 = d.initial_offset()
    o1 = d.latest_offset(o0, None)
    assert _ids(d, o0, o1) == ["h1", "h2"]
    assert o1["partitions"][rabbit_queue]["0"]["maxTs"] == 9_000 and o1["watermark"] == 8_000
    d.stop()


def test_plan_fails_clearly_when_the_wal_is_gone(amqp_url, rabbit_queue, tmp_path):
    d = _driver(amqp_url, rabbit_queue, tmp_path)
    with pytest.raises(WalGapError, match="walLocation"):
        d.plan({"seq": 0}, {"seq": 5})
    d.stop()


def test_missing_queue_is_a_clear_error(amqp_url, tmp_path):
    c = QueueConsumer(amqp_url, "no_such_queue_jet", 10, reconnect_timeout_s=1)
    with pytest.raises(QueueError, match="does not exist"):
        c.ensure_open()
    c.close()


def test_acks_of_an_older_channel_are_skipped(amqp_url, rabbit_queue, tmp_path):
    publish(amqp_url, rabbit_queue, ["a", "b"])
    c = QueueConsumer(amqp_url, rabbit_queue, 10)
    old = c.fetch(2, 0.2)
    assert [d.generation for d in old] == [1, 1]
    c._conn.close()  # the connection is lost; the broker requeues both
    c.ensure_open()
    assert c.generation == 2
    assert c.ack(old) == 0
    new = c.fetch(2, 0.2)
    assert [d.redelivered for d in new] == [True, True]
    assert c.ack(new) == 2
    assert wait_counts(rabbit_queue, (0, 0)) == (0, 0)
    c.close()


def test_idle_connection_survives_heartbeats(amqp_url, rabbit_queue):
    """pika does not answer heartbeats by itself; the keepalive thread does."""
    publish(amqp_url, rabbit_queue, ["a"])
    # 2 s, not 1: with 1 s a 2-second stall of a busy machine drops the connection
    c = QueueConsumer(amqp_url + "?heartbeat=2", rabbit_queue, 10)
    got = c.fetch(1, 2.0)
    time.sleep(6)  # the scenario itself: three heartbeat intervals without any call
    c.ensure_open()
    assert c.generation == 1 and c.reconnects == 0
    assert c.ack(got) == 1
    assert wait_counts(rabbit_queue, (0, 0)) == (0, 0)
    c.close()


def _take_over(driver: QueueDriver) -> int:
    """A successor (on another host) takes the driver's lease: the next epoch's file."""
    from jetspark.datasources.rabbitmq.lease import Lease

    successor = Lease(driver.lease.location, 60_000, host="elsewhere")
    epoch = driver.lease.epoch + 1
    assert successor._create(epoch)
    return epoch


def test_a_driver_that_lost_its_lease_touches_nothing(amqp_url, rabbit_queue, tmp_path):
    from jetspark.datasources.rabbitmq.lease import LeaseLostError

    publish(amqp_url, rabbit_queue, ["a", "b", "c"])
    d = _driver(amqp_url, rabbit_queue, tmp_path)
    o0 = d.initial_offset()
    epoch = _take_over(d)
    theirs = WalRange(0, 2, epoch)  # the successor already wrote its batch [0, 2)
    d.wal.write(theirs, _wal_rows(["x", "y"]))
    with pytest.raises(LeaseLostError, match="another run took over"):
        d.latest_offset(o0, None)
    assert d.wal.ranges() == [theirs]  # not discarded as an orphan
    assert wait_counts(rabbit_queue, (3, 0)) == (3, 0)  # nothing taken, nothing acked
    d.consumer.close()


def test_commit_dedups_only_the_file_of_the_logged_epoch(amqp_url, rabbit_queue, tmp_path):
    publish(amqp_url, rabbit_queue, ["a", "b"])
    d = _driver(amqp_url, rabbit_queue, tmp_path)
    o0 = d.initial_offset()
    o1 = d.latest_offset(o0, None)
    assert o1["seq"] == 2
    other = WalRange(0, 2, d.lease.epoch + 7)  # another writer's file for the same range
    d.wal.write(other, _wal_rows(["p", "q"]))
    assert [r.epoch for r in d.plan(o0, o1)] == [o1["epoch"]]
    d.commit_through(o1["seq"])
    assert "a" in d.dedup and "b" in d.dedup
    assert "p" not in d.dedup and "q" not in d.dedup  # their messages were never processed
    assert wait_counts(rabbit_queue, (0, 0)) == (0, 0)
    d.stop()


def _wal_rows(ids: list[str]):
    import pyarrow as pa

    from jetspark.datasources.rabbitmq.wal import WAL_SCHEMA

    n = len(ids)
    return pa.table({
        "message_id": ids, "body": [b"x"] * n, "routing_key": [""] * n, "exchange": [""] * n,
        "headers": pa.array([[]] * n, WAL_SCHEMA.field("headers").type),
        "timestamp": pa.array([0] * n, WAL_SCHEMA.field("timestamp").type),
        "redelivered": [False] * n, "event_time_ms": [0] * n, "late": [False] * n,
    }, schema=WAL_SCHEMA)


def test_malformed_event_time_fails_only_when_asked_and_nothing_is_acked(amqp_url, rabbit_queue, tmp_path):
    publish(amqp_url, rabbit_queue, ["ok", "bad"], timestamps=[1_767_225_600, 2**64 - 1])
    d = _driver(amqp_url, rabbit_queue, tmp_path, **{"eventTime.onMalformed": "fail"})
    with pytest.raises(MalformedEventTimeError, match=r"message 'bad' on queue .*eventTime.onMalformed"):
        d.latest_offset(d.initial_offset(), None)
    assert d.wal.ranges() == []
    d.stop()
    assert wait_counts(rabbit_queue, (2, 0)) == (2, 0)  # both back in the queue
    d2 = _driver(amqp_url, rabbit_queue, tmp_path)  # the default, null: counted, the receive time stands in
    o1 = d2.latest_offset(d2.initial_offset(), None)
    assert o1["seq"] == 2 and o1["counts"]["malformedEventTime"] == 1
    d2.latest_offset(o1, None)
    assert wait_counts(rabbit_queue, (0, 0)) == (0, 0)
    d2.stop()


def test_batches_and_the_read_ahead_are_bounded_in_bytes(amqp_url, rabbit_queue, tmp_path):
    kb = b"x" * 1000
    publish(amqp_url, rabbit_queue, [f"m{i}" for i in range(5)] + ["big"], bodies=[kb] * 5 + [kb * 3])
    d = _driver(amqp_url, rabbit_queue, tmp_path, maxBytesPerTrigger="2500", bufferMemory="1 MB")
    offsets = [d.initial_offset()]
    sizes = []
    while len(offsets) < 10:
        nxt = d.latest_offset(offsets[-1], None)
        if nxt["seq"] == offsets[-1]["seq"]:
            break
        sizes.append(len(_ids(d, offsets[-1], nxt)))
        offsets.append(nxt)
    assert sizes == [2, 2, 1, 1]  # 2 x 1000 B fit in 2500 B; the 3000 B message goes alone
    assert d.consumer.buffer_bytes == 1 << 20
    d.stop()


def test_a_full_buffer_stops_reading_ahead(amqp_url, rabbit_queue):
    publish(amqp_url, rabbit_queue, [f"m{i}" for i in range(40)], bodies=[b"y" * 100_000] * 40)
    c = QueueConsumer(amqp_url, rabbit_queue, prefetch=1000, buffer_bytes=1 << 20)
    c.ensure_open()
    got = c.fetch(1000, 0.5)
    assert 0 < len(got) < 40  # the bound stops the reads before the 4 MB are in
    assert sum(len(d.body) for d in got) < (1 << 20) + (2 << 20)  # bound + one socket read's worth
    c.close()


def test_header_integers_beyond_2_to_53_are_malformed_event_times(amqp_url, rabbit_queue, tmp_path):
    """An integer header that float64 cannot hold exactly is no time in years 1-9999: it follows
    eventTime.onMalformed (null: counted, the receive time stands in), never an Arrow error."""
    publish(amqp_url, rabbit_queue, ["ok", "2^53+1", "-2^63"],
            headers=[{"ts": 1_767_225_600_000}, {"ts": 9_007_199_254_740_993}, {"ts": -2**63}])
    d = _driver(amqp_url, rabbit_queue, tmp_path, eventTime="header:ts")
    o1 = d.latest_offset(d.initial_offset(), None)
    assert o1["seq"] == 3 and o1["counts"]["malformedEventTime"] == 2
    rows = {r["message_id"]: r for r in d.wal.read(d.plan(d.initial_offset(), o1)[0]).to_pylist()}
    assert rows["ok"]["event_time_ms"] == 1_767_225_600_000
    assert rows["-2^63"]["event_time_ms"] > 1_767_225_600_000  # the receive time
    d.latest_offset(o1, None)
    assert wait_counts(rabbit_queue, (0, 0)) == (0, 0)  # all acked: nothing comes back
    d.stop()


def test_header_tables_count_in_the_read_ahead_bound(amqp_url, rabbit_queue):
    """Empty bodies with ~100 KB header tables of tiny entries (~2 MB of Python objects each):
    bufferMemory counts the tables, so the reads stop after about one socket read's worth."""
    table = {f"k{i}": i for i in range(9_000)}
    publish(amqp_url, rabbit_queue, [f"m{i}" for i in range(40)], bodies=[b""] * 40, headers=[table] * 40)
    c = QueueConsumer(amqp_url, rabbit_queue, prefetch=1000, buffer_bytes=1 << 20)
    c.ensure_open()
    got = c.fetch(1000, 0.5)
    wire = got[0].properties.headers_bytes
    assert wire > 90_000 and got[0].size == HEADER_COST * wire
    assert 0 < len(got) <= 2 + READ_CHUNK // wire  # the bound (one message fills it) + one socket read
    c.close()


def test_a_body_over_max_message_size_is_dead_lettered_and_the_query_goes_on(amqp_url, tmp_path):
    """maxMessageSize: the body is never read into memory; the message is rejected without
    requeue (to the queue's dead-letter exchange), counted, and the others are taken."""
    import uuid

    import pika

    queue, dlq = f"jet_big_{uuid.uuid4().hex[:8]}", f"jet_dlq_{uuid.uuid4().hex[:8]}"
    conn = pika.BlockingConnection(pika.URLParameters(amqp_url))
    ch = conn.channel()
    ch.queue_declare(dlq, durable=True)
    ch.queue_declare(queue, durable=True, arguments={"x-dead-letter-exchange": "",
                                                     "x-dead-letter-routing-key": dlq})
    try:
        publish(amqp_url, queue, ["small", "big", "after"], bodies=[b"s" * 10, b"b" * 400_000, b"a" * 10])
        d = _driver(amqp_url, queue, tmp_path, maxMessageSize="100000")
        offsets, ids = [d.initial_offset()], []
        for _ in range(20):  # "after" comes after "big": its batch's counts include the rejection
            nxt = d.latest_offset(offsets[-1], None)
            if nxt["seq"] > offsets[-1]["seq"]:
                ids += _ids(d, offsets[-1], nxt)
                offsets.append(nxt)
            if "after" in ids:
                break
        assert ids == ["small", "after"] and offsets[-1]["counts"]["oversizeRejected"] == 1
        d.latest_offset(offsets[-1], None)  # commits: acks
        assert wait_counts(queue, (0, 0)) == (0, 0)
        assert wait_counts(dlq, (1, 0)) == (1, 0)
        _, _, body = ch.basic_get(dlq, auto_ack=True)
        assert body == b"b" * 400_000  # the broker dead-lettered it whole
        d.stop()
    finally:
        ch.queue_delete(queue)
        ch.queue_delete(dlq)
        conn.close()
