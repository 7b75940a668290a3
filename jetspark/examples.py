"""The inputs of the documentation's examples, so a reader runs exactly what a page shows.

Each function fills a topic or a queue with the data an example reads and returns how many
records or messages it wrote:

- :func:`positions`: Kafka topic ``positions`` (2 partitions), vehicles ``v1``…``v4`` (the
  record key) sending one position a second for 30 seconds of event time from
  2026-01-01 00:00:00 UTC (the record timestamp), value ``{"vehicle": "v1", "speed": 87.0}``;
- :func:`orders`: RabbitMQ queue ``orders``, 100 orders with distinct ``message_id``s and
  10 of them published a second time (a publisher's retry);
- :func:`work_items`: Kafka topic ``work-items`` (2 partitions), 100 new work items a call,
  read through the share group ``work-queue``, which it makes start at the earliest offset.

``python -m jetspark.examples`` fills both, from the ``JETSPARK_KAFKA_BOOTSTRAP`` and
``JETSPARK_AMQP_URL`` variables (``jetspark services env`` prints them).
"""

from __future__ import annotations

import datetime as dt
import json
import os

__all__ = ["SECONDS", "T0", "VEHICLES", "create_topic", "holds_records", "orders", "positions", "speed_of",
           "work_items"]

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
"""Event time of the first position and of the first order."""
VEHICLES = 4
SECONDS = 30
ORDERS = 100
RETRIED = 10
WORK_ITEMS = 100


def speed_of(vehicle: int, second: int) -> float:
    """Vehicle ``v<vehicle>``'s speed at ``T0 + second`` (60…120, a fixed pattern)."""
    return float(60 + (second * 13 + vehicle * 29) % 61)


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    """Creates ``topic`` without time retention when it does not exist (an existing one is kept).

    The event times lie in the past, and Kafka's time-based retention goes by record timestamp:
    with the default ``retention.ms`` (7 days) the broker would delete the records at once."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic in admin.list_topics(timeout=30).topics:
        return
    future = admin.create_topics([NewTopic(topic, partitions, 1, config={"retention.ms": "-1"})],
                                 operation_timeout=30)[topic]
    try:
        future.result(timeout=30)
    except Exception as e:  # created meanwhile by another run: fine
        if "TOPIC_ALREADY_EXISTS" not in str(e):
            raise


_SETTLING = ("NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PART",
             "NOT_LEADER_OR_FOLLOWER")
"""Errors a topic answers with in the moments after its creation, before its partitions have
taken their leaders: asked again, it answers."""


def holds_records(bootstrap: str, topic: str, timeout_s: float = 30.0) -> bool:
    """Whether ``topic`` (which must exist) holds records: a page's example fills its topic only
    when it does not, so running it again reads the same records and prints the same."""
    import time

    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "jetspark-examples",
                         "enable.auto.commit": False})
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                meta = consumer.list_topics(topic, timeout=30).topics[topic]
                return any(
                    consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] > 0
                    for p in meta.partitions)
            except KafkaException as e:
                settling = any(code in str(e) for code in _SETTLING)
                if not settling or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # a new topic's leaders are being elected
    finally:
        consumer.close()


def positions(bootstrap: str, topic: str = "positions") -> int:
    """Produces the 120 positions to ``topic`` (created with 2 partitions and no time retention
    when missing), vehicle k on partition k % 2, in event-time order.

    A topic that already holds records is left as it is (returns 0), so running a page's
    examples one after another, or again, reads the same 120 records. Only the pages that read
    these positions use this topic: a page whose records differ (Avro, Protobuf, JSON Schema
    values) writes to a topic named after it."""
    from confluent_kafka import Producer

    create_topic(bootstrap, topic, 2)
    if holds_records(bootstrap, topic):
        return 0
    producer = Producer({"bootstrap.servers": bootstrap})
    t0_ms = int(T0.timestamp() * 1000)
    for second in range(SECONDS):
        for k in range(1, VEHICLES + 1):
            value = json.dumps({"vehicle": f"v{k}", "speed": speed_of(k, second)})
            producer.produce(topic, value=value.encode(), key=f"v{k}".encode(), partition=k % 2,
                             timestamp=t0_ms + second * 1000)
    left = producer.flush(30)
    if left:
        raise RuntimeError(f"{left} position(s) not delivered to topic {topic!r} within 30 s")
    return VEHICLES * SECONDS


def orders(amqp_url: str, queue: str = "orders") -> int:
    """Publishes orders 0…99 to ``queue`` (declared durable when missing), message_id
    ``order-<n>`` and AMQP timestamp T0 + n seconds, then orders 0…9 once more (the same IDs:
    a publisher's retry), with publisher confirms."""
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        channel = conn.channel()
        channel.queue_declare(queue, durable=True)
        channel.confirm_delivery()
        sent = [*range(ORDERS), *range(RETRIED)]
        for n in sent:
            props = pika.BasicProperties(message_id=f"order-{n}", delivery_mode=2,
                                         timestamp=int(T0.timestamp()) + n)
            channel.basic_publish("", queue, json.dumps({"order": n}).encode(), props)
    finally:
        conn.close()
    return len(sent)


def work_items(bootstrap: str, topic: str = "work-items", group: str = "work-queue") -> list[str]:
    """Produces 100 new work items to ``topic`` (created with 2 partitions when missing), value
    ``{"item": "<run>-<n>", "n": n}`` with a new ``<run>`` each call, and sets the share group
    ``group``'s ``share.auto.offset.reset`` to ``earliest`` (a share group starts at the latest
    offset otherwise, and would skip items produced before its first member joined). Returns
    the items' names, so a page's example counts this call's items whatever an earlier run left."""
    import uuid

    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    create_topic(bootstrap, topic, 2)
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.incremental_alter_configs(
            [ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])]).values():
        future.result(30)
    run = uuid.uuid4().hex[:8]
    items = [f"{run}-{n}" for n in range(WORK_ITEMS)]
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for n, item in enumerate(items):
        producer.produce(topic, json.dumps({"item": item, "n": n}).encode(), partition=n % 2)
    left = producer.flush(30)
    if left:
        raise RuntimeError(f"{left} work item(s) not delivered to topic {topic!r} within 30 s")
    return items


def main() -> None:
    """Fills ``positions`` and ``orders`` on the services the ``JETSPARK_*`` variables name."""
    kafka, amqp = os.environ.get("JETSPARK_KAFKA_BOOTSTRAP"), os.environ.get("JETSPARK_AMQP_URL")
    if kafka:
        print(f"positions: {positions(kafka)} records produced")
    if amqp:
        print(f"orders: {orders(amqp)} messages published")
    if not (kafka or amqp):
        raise SystemExit("set JETSPARK_KAFKA_BOOTSTRAP and/or JETSPARK_AMQP_URL "
                         "(eval \"$(jetspark services env)\")")


if __name__ == "__main__":
    main()
