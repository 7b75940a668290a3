"""The queue driver's cut-off for future event times (``watermark.maxFutureSkew``), with an
injected clock and a fake consumer: the decision is made once, before the WAL write, and the
WAL holds it."""

from __future__ import annotations

import datetime as dt

import pytest

from jetspark.datasources.malformed import MalformedEventTimeError
from jetspark.datasources.rabbitmq.amqp import Properties
from jetspark.datasources.rabbitmq.consumer import Delivery
from jetspark.datasources.rabbitmq.driver import QueueDriver
from jetspark.datasources.rabbitmq.options import RabbitMQOptions
from jetspark.datasources.rabbitmq.source import RabbitMQStreamReader, read_partition
from jetspark.datasources.rabbitmq.wal import WalRange

NOW_MS = 1_767_225_600_000  # the driver's clock: 2026-01-01 00:00:00 UTC
NOW_S = NOW_MS // 1000


class QueuedConsumer:
    """Hands out the deliveries it was given, once; remembers acks."""

    def __init__(self, deliveries: list[Delivery]) -> None:
        self.deliveries = deliveries
        self.acked: list = []

    def ensure_open(self) -> None:
        pass

    def fetch(self, want: int, _poll_s: float, **_) -> list[Delivery]:
        out, self.deliveries = self.deliveries[:want], self.deliveries[want:]
        return out

    def ack(self, deliveries: list) -> int:
        self.acked.extend(deliveries)
        return len(deliveries)

    def unfetch(self, deliveries: list) -> None:
        self.deliveries = list(deliveries) + self.deliveries

    def close(self) -> None:
        pass


def _driver(tmp_path, stamps_s: list[int], **extra: str) -> QueueDriver:
    options = RabbitMQOptions.parse({"url": "amqp://guest:guest@127.0.0.1:1/", "queue": "q",
                                     "walLocation": str(tmp_path / "wal"), **extra})
    driver = QueueDriver(options, clock=lambda: NOW_MS)
    driver.lease._stop.set()
    driver.lease._renewer.join()
    driver.consumer = QueuedConsumer([
        Delivery(i + 1, 1, b"x", Properties(f"m{i}", s, None, False), "rk", "", False)
        for i, s in enumerate(stamps_s)])
    return driver


# a producer clock a year ahead stamps the second message; the third is on time, a minute ahead
STAMPS = [NOW_S - 60, NOW_S + 365 * 86_400, NOW_S + 60]


def test_a_message_beyond_the_cut_off_does_not_move_w_and_its_receive_time_stands_in(tmp_path):
    driver = _driver(tmp_path, STAMPS, **{"watermark.maxFutureSkew": "10 minutes"})
    end = driver.latest_offset(driver.initial_offset(), None)
    assert end["counts"]["malformedEventTime"] == 1 and end["counts"]["late"] == 0
    assert end["partitions"]["q"]["0"]["maxTs"] == (NOW_S + 60) * 1000 == end["watermark"]
    wal = driver.wal.read(WalRange(0, 3, driver.lease.epoch), ["event_time_ms", "late", "timestamp"])
    assert wal.column("event_time_ms").to_pylist() == [(NOW_S - 60) * 1000, NOW_MS, (NOW_S + 60) * 1000]
    assert wal.column("late").to_pylist() == [False, False, False]
    assert [t is None for t in wal.column("timestamp").to_pylist()] == [False, True, False]
    driver.stop()


def test_without_the_option_the_future_message_moves_w_a_year_ahead(tmp_path):
    driver = _driver(tmp_path, STAMPS)
    end = driver.latest_offset(driver.initial_offset(), None)
    # lateness is judged against the W the batch started with: none here, but every on-time
    # message of the next batches is behind this W
    assert end["counts"]["malformedEventTime"] == 0 and end["counts"]["late"] == 0
    assert end["watermark"] == STAMPS[1] * 1000
    driver.stop()


def test_fail_names_the_message_and_the_cut_off_and_writes_nothing(tmp_path):
    driver = _driver(tmp_path, STAMPS, **{"watermark.maxFutureSkew": "10 minutes",
                                          "eventTime.onMalformed": "fail"})
    beyond = rf"message 'm1' on queue 'q'.*later than the batch's cut-off {NOW_MS + 600_000}"
    with pytest.raises(MalformedEventTimeError, match=beyond + r".*watermark\.maxFutureSkew"):
        driver.latest_offset(driver.initial_offset(), None)
    assert driver.wal.ranges() == [] and driver.consumer.acked == []
    driver.stop()


def test_a_replay_reads_the_decision_from_the_wal_whatever_the_clock(tmp_path):
    """After a restart a year later (when the message would be on time), Spark replays the
    logged batch: the rows come from the WAL, with the first driver's decision."""
    skew = {"watermark.maxFutureSkew": "10 minutes", "watermark.lateRecords": "keep"}
    first = _driver(tmp_path, STAMPS, **skew)
    start = first.initial_offset()
    end = first.latest_offset(start, None)
    first.stop()  # a crash before the commit: the deliveries come back to the next driver
    reader = RabbitMQStreamReader(first.options)
    reader._driver = _driver(tmp_path, STAMPS, **skew)
    reader._driver.clock = lambda: NOW_MS + 365 * 86_400_000
    rows = [row for p in reader.partitions(start, end) for batch in read_partition(p)
            for row in batch.to_pylist()]
    assert [(r["message_id"], r["timestamp"] is None, r["late"]) for r in rows] == [
        ("m0", False, False), ("m1", True, False), ("m2", False, False)]
    assert {r["watermark"] for r in rows} == {dt.datetime.fromtimestamp(end["watermark"] / 1000, dt.UTC)}
    reader.stop()
