"""``QueueConsumer.deliveries_due``: whether a trigger should wait before it says "no data"."""

from __future__ import annotations

from jetspark.datasources.rabbitmq.amqp import Properties
from jetspark.datasources.rabbitmq.consumer import Delivery, QueueConsumer


class _Channel:
    """A connection whose passive declare reports ``ready`` and, while it waits for the reply,
    hands over ``arriving`` deliveries (as the real one decodes them during a call)."""

    is_open = True

    def __init__(self, consumer: QueueConsumer, ready: int, arriving: int = 0, fails: bool = False) -> None:
        self.consumer, self.ready, self.arriving, self.fails = consumer, ready, arriving, fails

    def process(self, timeout: float) -> bool:
        return False

    def declare_passive(self, queue: str) -> int:
        if self.fails:
            raise OSError("connection reset")
        for tag in range(1, self.arriving + 1):
            self.consumer._unacked.add(tag)
            delivery = Delivery(self.consumer.generation, tag, b"x", Properties(), "q", "", False)
            self.consumer._buffer.append(delivery)
        return self.ready


def _consumer(ready: int, **kwargs) -> QueueConsumer:
    c = QueueConsumer("amqp://127.0.0.1:1/%2F", "q", prefetch=2)
    c.generation = 1
    c._conn = _Channel(c, ready, **kwargs)
    return c


def test_ready_messages_with_room_are_due_and_an_empty_queue_is_not():
    assert _consumer(ready=3).deliveries_due()
    assert not _consumer(ready=0).deliveries_due()


def test_deliveries_that_arrive_while_counting_are_due():
    # the broker's count leaves out what it already sent us
    assert _consumer(ready=0, arriving=1).deliveries_due()


def test_nothing_is_due_when_the_prefetch_window_is_full():
    c = _consumer(ready=5)
    c._unacked.update({7, 8})  # held by the open batch until its commit
    assert not c.deliveries_due()


def test_a_lost_connection_makes_what_it_held_due_again():
    c = _consumer(ready=0, fails=True)
    reconnected = []
    c._reconnect = lambda: reconnected.append(True)  # type: ignore[method-assign]
    assert c.deliveries_due() and reconnected
