"""Helpers of the jetkafkashare tests: a share group that starts at the earliest offset, records
produced with known values, a plain share consumer of the same group, and the group's members
as Kafka's tool describes them."""

from __future__ import annotations

import subprocess
import time
import uuid

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from jetspark.devtools.services.kafka import SHARE_GROUPS, tool_command


def share_group(bootstrap: str, **config: str) -> str:
    """A new share group name whose ``share.auto.offset.reset`` is ``earliest`` (a share group
    starts at the latest offset by default: records produced before it exist would be skipped),
    with more group settings (``share_record_lock_duration_ms="15000"``: dots as underscores)."""
    name = f"jetshare-{uuid.uuid4().hex[:10]}"
    configure_group(bootstrap, name, share_auto_offset_reset="earliest", **config)
    return name


def configure_group(bootstrap: str, group: str, **config: str) -> None:
    """Set the group's settings (dots as underscores), e.g. its lock duration."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
               for k, v in config.items()]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def produce(bootstrap: str, topic: str, n: int, partitions: int,
            values: list[bytes] | None = None) -> list[bytes]:
    """``n`` records ``v0`` … (or ``values``) spread over the partitions; their values."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    values = [f"v{i}".encode() for i in range(n)] if values is None else values
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


def leftovers(bootstrap: str, group: str, topic: str, partitions: int) -> list[bytes]:
    """What a new member of the group is handed before a marker produced now to each partition:
    records no member ACCEPTed (none when every record was acknowledged and none is held)."""
    markers = [f"marker{p}".encode() for p in range(partitions)]
    rest = PlainShareConsumer(bootstrap, group, topic)
    try:
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        for p, marker in enumerate(markers):
            producer.produce(topic, marker, partition=p)
        assert producer.flush(30) == 0
        rest.take_until(lambda: set(markers) <= set(rest.values))
    finally:
        rest.close()
    return [v for v in rest.values if v not in markers]


def share_group_members(bootstrap: str, group: str) -> str:
    """What ``kafka-share-groups.sh --describe --members`` says of ``group`` (its output and
    its messages: "has no active members" is one of them)."""
    run = subprocess.run(tool_command(SHARE_GROUPS, "--bootstrap-server", bootstrap, "--describe",
                                      "--members", "--group", group),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout + run.stderr
