"""The driver's fencing: once a successor holds the lease, ``commit_through`` neither writes
the dedup store nor acks, and leaves the WAL as it is — whether the lease was lost before the
dedup write or between the dedup write and the ack. The broker is not needed: the consumer is
a recording stand-in (ack and ensure_open only)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from jetspark.datasources.rabbitmq.dedup import DedupStore
from jetspark.datasources.rabbitmq.driver import PendingBatch, QueueDriver
from jetspark.datasources.rabbitmq.lease import Lease, LeaseLostError
from jetspark.datasources.rabbitmq.options import RabbitMQOptions
from jetspark.datasources.rabbitmq.wal import WAL_SCHEMA, WalRange

IDS = ["m0", "m1", "m2"]


class RecordingConsumer:
    def __init__(self, on_open=lambda: None) -> None:
        self.acked: list[list] = []
        self.on_open = on_open

    def ensure_open(self) -> None:
        self.on_open()

    def ack(self, deliveries: list) -> int:
        self.acked.append(list(deliveries))
        return len(deliveries)

    def close(self) -> None:
        pass


def _rows(ids: list[str]) -> pa.Table:
    n = len(ids)
    return pa.table({"message_id": ids, "body": [b"x"] * n, "routing_key": ["r"] * n, "exchange": [""] * n,
                     "headers": pa.array([[]] * n, WAL_SCHEMA.field("headers").type),
                     "timestamp": pa.array([0] * n, pa.int64()).cast(pa.timestamp("us", "UTC")),
                     "redelivered": [False] * n, "event_time_ms": np.zeros(n, np.int64),
                     "late": [False] * n}, schema=WAL_SCHEMA)


def _driver(tmp_path) -> tuple[QueueDriver, WalRange]:
    """A driver holding the lease, with one batch [0, 3) written to its WAL and pending an ack."""
    options = RabbitMQOptions.parse({"url": "amqp://guest:guest@127.0.0.1:1/", "queue": "q",
                                     "walLocation": str(tmp_path / "wal")})
    driver = QueueDriver(options)
    driver.lease._stop.set()  # its renewal thread out of the way: the test decides who holds it
    driver.lease._renewer.join()
    driver.consumer = RecordingConsumer()
    r = WalRange(0, 3, driver.lease.epoch)
    driver.wal.write(r, _rows(IDS))
    assert driver.ranges() == [r]
    driver._pending[r] = PendingBatch(list(IDS), ["d0", "d1", "d2"])
    return driver, r


def _take_over(driver: QueueDriver) -> Lease:
    """A successor takes the lease (the driver's file says released, as a stale driver's would
    after a takeover; the successor's epoch is then the newest)."""
    driver.lease._write(driver.lease.epoch, released=True)
    successor = Lease(driver.options.wal_location, 60_000)
    assert successor.acquire() == driver.lease.epoch + 1
    return successor


def _dedup_has(driver: QueueDriver) -> list[bool]:
    store = DedupStore(driver.options.wal_location, 3_600_000)
    return store.contains_many(IDS).tolist()


def test_commit_writes_dedup_then_acks_then_drops_the_wal_while_held(tmp_path):
    driver, _ = _driver(tmp_path)
    driver.commit_through(3)
    assert driver.consumer.acked == [["d0", "d1", "d2"]]
    assert _dedup_has(driver) == [True, True, True] and driver.wal.ranges() == []
    driver.stop()


def test_lost_before_the_dedup_write_nothing_is_written_or_acked(tmp_path):
    driver, r = _driver(tmp_path)
    successor = _take_over(driver)
    with pytest.raises(LeaseLostError, match="another run took over"):
        driver.commit_through(3)
    assert driver.consumer.acked == [] and _dedup_has(driver) == [False, False, False]
    assert driver.wal.ranges() == [r]  # the successor replays it
    successor.release()


def test_lost_between_the_dedup_write_and_the_ack_nothing_is_acked(tmp_path):
    driver, r = _driver(tmp_path)
    successors: list[Lease] = []
    # commit_through opens the consumer after the dedup write, just before the ack's check
    driver.consumer = RecordingConsumer(on_open=lambda: successors.append(_take_over(driver)))
    with pytest.raises(LeaseLostError, match="another run took over"):
        driver.commit_through(3)
    assert len(successors) == 1  # the takeover happened after the dedup write
    assert _dedup_has(driver) == [True, True, True]
    assert driver.consumer.acked == [] and driver.wal.ranges() == [r]
    successors[0].release()
