"""The demo's event stream: vehicle positions with skew, an idle partition, late and bad records.

Partition layout (with ``P`` partitions, vehicles assigned round-robin to partitions):

- partition 1 runs ``SKEW_S`` (45 s) behind the others in event time; the others are
  ``PARTITION_GAP_S`` apart (partition p that many seconds times p behind partition 0);
- the last partition goes idle half-way: :func:`split_phases` leaves it out of the second
  half, which the demo produces after the first half has been processed;
- partition 0 gets ``LATE`` records in the second half stamped ``LATE_BY_S`` before the
  stream's first event time: once the first half is read, they are behind the coalesced
  watermark, and every window they belong to has been emitted (lateness is judged against
  the coalesced watermark, docs/design.md, "Watermarks"), so they count in no window;
- partition 2 (or 0) gets ``MALFORMED`` values that are not JSON.

Record timestamps are the event times, and recent: Kafka's retention would delete records
stamped years ago.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass

SKEW_S = 45
PARTITION_GAP_S = 2
LAG_S = 5
JITTER_MS = 2_000  # out-of-order within a partition, below the lag
LATE, LATE_BY_S = 5, 20
MALFORMED = 4
VEHICLES_PER_PARTITION = 3


@dataclass(frozen=True)
class Record:
    """One produced record: where it goes, its event time (epoch ms) and its raw value."""

    partition: int
    ts: int
    value: bytes
    vehicle: str | None = None  # None: malformed
    speed: float | None = None
    late: bool = False
    phase: int = 0  # 0: first half, 1: second half


def split_phases(records: list[Record], partitions: int) -> tuple[list[Record], list[Record]]:
    """First and second half; the idle partition (the last one, with > 2) has no second half."""
    idle_p = partitions - 1 if partitions > 2 else None
    first = [r for r in records if r.phase == 0]
    second = [r for r in records if r.phase == 1 and r.partition != idle_p]
    return first, second


def generate(records: int, partitions: int, duration_s: int, seed: int = 7,
             start_ms: int | None = None) -> list[Record]:
    """About ``records`` records over ``duration_s`` seconds of event time from ``start_ms``
    (default: ending about now); the same arguments give the same records."""
    rng = random.Random(seed)
    if start_ms is None:
        start_ms = int(time.time() * 1000) - (duration_s + SKEW_S + 60) * 1000
    start = start_ms // 10_000 * 10_000
    per_partition = max(1, records // partitions)
    out: list[Record] = []
    for p in range(partitions):
        vehicles = [f"v{p}{i}" for i in range(VEHICLES_PER_PARTITION)]
        speed = {v: rng.uniform(30, 90) for v in vehicles}
        # the others a few seconds apart, so the report's picture tells their lines apart
        offset_ms = -SKEW_S * 1000 if p == 1 else -PARTITION_GAP_S * 1000 * p
        count = per_partition
        step = duration_s * 1000 / per_partition
        half = count // 2
        late_at = set(rng.sample(range(half, count), min(LATE, count - half))) if p == 0 else set()
        bad_p = 2 if partitions > 2 else 0
        bad_at = set(rng.sample(range(count), min(MALFORMED, count))) if p == bad_p else set()
        for i in range(count):
            v = vehicles[i % len(vehicles)]
            ts = start + SKEW_S * 1000 + offset_ms + int(i * step) + rng.randrange(JITTER_MS)
            if i in bad_at:
                out.append(Record(p, ts, b'{"vehicle": "' + v.encode() + b'", "speed": oops',
                                  phase=0 if i < count // 2 else 1))
                continue
            late = i in late_at
            if late:
                ts = start - LATE_BY_S * 1000
            speed[v] = min(130.0, max(0.0, speed[v] + rng.uniform(-3, 3)))
            s = round(speed[v], 2)
            value = json.dumps({"vehicle": v, "speed": s, "lat": round(52.5 + rng.random() / 100, 5),
                                "lon": round(13.4 + rng.random() / 100, 5)}).encode()
            out.append(Record(p, ts, value, v, s, late, phase=0 if i < count // 2 else 1))
    return out


def produce(bootstrap: str, topic: str, records: list[Record], partitions: int = 0) -> None:
    """Write the records with an idempotent producer (creating the topic if asked)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    if partitions:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    for r in records:
        producer.produce(topic, r.value, (r.vehicle or "bad").encode(), partition=r.partition,
                         timestamp=r.ts)
        producer.poll(0)
    if producer.flush(60):
        raise RuntimeError(f"records not delivered to {topic} within 60 s")
