"""Helpers of the jetkafkashare tests: a share group that starts at the earliest offset, records
produced with known values, and a plain share consumer of the same group."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType


def share_group(bootstrap: str, **config: str) -> str:
    """A new share group name whose ``share.auto.offset.reset`` is ``earliest`` (a share group
    starts at the latest offset by default: records produced before it exist would be skipped),
    with more group settings (``share_record_lock_duration_ms="15000"``: dots as underscores)."""
    name = f"jetshare-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    settings = {"share.auto.offset.reset": "earliest", **{k.replace("_", "."): v for k, v in config.items()}}
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in settings.items()]
    resource = ConfigResource(ResourceType.GROUP, name, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    return name


def produce(bootstrap: str, topic: str, n: int, partitions: int) -> list[bytes]:
    """``n`` records ``v0`` … spread over the partitions; their values."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    values = [f"v{i}".encode() for i in range(n)]
    for i, v in enumerate(values):
        producer.produce(topic, v, key=str(i).encode(), partition=i % partitions)
    assert producer.flush(30) == 0
    return values


class PlainShareConsumer:
    """A plain confluent-kafka share consumer of the group: each poll's records are ACCEPTed
    and committed (confirmed) before the next poll."""

    def __init__(self, bootstrap: str, group: str, topic: str, max_records: int = 10) -> None:
        self.consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                       "share.acknowledgement.mode": "explicit",
                                       "max.poll.records": str(max_records)})
        self.consumer.subscribe([topic])
        self.values: list[bytes] = []

    def take(self, timeout_s: float = 1.0) -> int:
        """One poll, its records ACCEPTed and the acknowledgements confirmed; how many."""
        msgs = [m for m in self.consumer.poll(timeout_s) if m.error() is None]
        for m in msgs:
            self.values.append(m.value())
            self.consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        if msgs:
            results = self.consumer.commit_sync(30)
            assert all(err is None for err in results.values()), results
        return len(msgs)

    def take_until(self, done, deadline_s: float = 120) -> None:
        """Poll until ``done()`` (bounded by ``deadline_s``: a failure, never a pass)."""
        end = time.monotonic() + deadline_s
        while not done():
            assert time.monotonic() < end, f"not done within {deadline_s} s: {len(self.values)} taken"
            self.take()

    def close(self) -> None:
        self.consumer.close()
