"""Read a whole topic back, with a chosen isolation level (for the Kafka sink tests)."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition


def read_topic(bootstrap: str, topic: str, isolation: str = "read_committed", timeout_s: float = 60.0
               ) -> list[tuple[bytes | None, bytes | None, int, list]]:
    """(key, value, partition, headers) of every record up to the end offsets at call time."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                         "enable.auto.commit": "false", "isolation.level": isolation,
                         "auto.offset.reset": "earliest"})
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        partitions = sorted(meta.partitions)
        ends = {}
        for p in partitions:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        records = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            positions = consumer.position([TopicPartition(topic, p) for p in partitions])
            if all(tp.offset >= ends[tp.partition] for tp in positions if ends[tp.partition] > 0):
                break
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            records.append((msg.key(), msg.value(), msg.partition(), msg.headers() or []))
        else:
            raise AssertionError(f"did not reach the end offsets {ends} of {topic} within {timeout_s} s")
        return records
    finally:
        consumer.close()


def committed_marker(bootstrap: str, group: str, topic: str) -> int:
    """The sink marker (next batch id) a transactional sink partition committed."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": "false",
                         "isolation.level": "read_committed"})
    try:
        [tp] = consumer.committed([TopicPartition(topic, 0)], timeout=30)
        return tp.offset
    finally:
        consumer.close()
