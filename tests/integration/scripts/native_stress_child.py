"""Open, read with and close native Kafka consumers many times from concurrent threads.

``python native_stress_child.py <bootstrap> <topic> <cycles> <threads>``: the topic has 2
partitions of 60 records (offsets 0-59). Cycle ``i`` reads 30 offsets of partition ``i % 2``
and checks them; its consumer is closed explicitly, dropped (deallocated) or taken from and
returned to the reader's pool, in turn. Prints ``ok <cycles>``; any error exits non-zero.
"""

from __future__ import annotations

import sys
import uuid
from concurrent.futures import ThreadPoolExecutor

from jetspark.datasources.kafka.consumers import consumer_conf
from jetspark.datasources.kafka.native import NativeConsumer
from jetspark.datasources.kafka.read import RangeSpec, ReadSettings, read_range

bootstrap, topic, cycles, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
KAFKA = {"bootstrap.servers": bootstrap, "group.id": f"native-stress-{uuid.uuid4().hex[:8]}"}
SETTINGS = ReadSettings(kafka=KAFKA, include_headers=False, keep_late=True, fail_on_data_loss=True,
                        poll_timeout_ms=60_000, chunk_rows=16)


def read_direct(partition: int, start: int, end: int, close: bool) -> list[int]:
    consumer = NativeConsumer(consumer_conf(KAFKA))
    consumer.assign(topic, partition, start)
    got: list[int] = []
    for _ in range(120):  # 500 ms waits: a minute without the range's end is an error
        chunk = consumer.read(16, end, 500)
        if chunk.error_code:
            raise RuntimeError(chunk.error)
        got += chunk.offsets.tolist()
        at_end = chunk.past_end or (chunk.eof_at is not None and chunk.eof_at >= end)
        if at_end or (got and got[-1] == end - 1):
            break
    if close:
        consumer.close()
    return got


def cycle(i: int) -> None:
    partition, start = i % 2, i % 20
    end = start + 30
    kind = i % 3
    if kind == 2:
        rng = RangeSpec(topic, partition, start, end, None, None, None)
        got = [o for b in read_range(SETTINGS, rng, native=True) for o in b.column("offset").to_pylist()]
    else:
        got = read_direct(partition, start, end, close=kind == 0)
    if got != list(range(start, end)):
        raise AssertionError(f"cycle {i}: partition {partition} offsets {got}, wanted {start}..{end - 1}")


with ThreadPoolExecutor(threads) as pool:
    done = sum(1 for _ in pool.map(cycle, range(cycles)))
print(f"ok {done}", flush=True)
