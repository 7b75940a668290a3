"""The durable dedup store: IDs survive a restart, expire after the retention, merge."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from jetspark.datasources import rabbitmq_dedup
from jetspark.datasources.rabbitmq_dedup import DedupStore


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def test_ids_survive_a_restart(tmp_path):
    clock = Clock()
    store = DedupStore(str(tmp_path), retention_ms=60_000, clock=clock)
    store.add(["a", "b"], end_seq=2)
    store.add(["c"], end_seq=3)
    again = DedupStore(str(tmp_path), retention_ms=60_000, clock=clock)
    assert {"a", "b", "c"} == {i for i in "abcd" if i in again}


def test_ids_expire_after_the_retention_and_segments_are_deleted(tmp_path):
    clock = Clock()
    store = DedupStore(str(tmp_path), retention_ms=60_000, clock=clock)
    store.add(["old"], end_seq=1)
    clock.now += 30_000
    store.add(["new"], end_seq=2)
    clock.now += 40_000  # "old" is 70 s old, "new" 40 s
    assert "old" not in store and "new" in store
    store.add(["newer"], end_seq=3)
    assert sorted(os.listdir(tmp_path / "dedup")) == [
        "seg-00000000000000000002.arrow", "seg-00000000000000000003.arrow"]
    reloaded = DedupStore(str(tmp_path), retention_ms=60_000, clock=clock)
    assert "old" not in reloaded and "new" in reloaded and "newer" in reloaded


def test_rewriting_a_segment_is_idempotent(tmp_path):
    store = DedupStore(str(tmp_path), retention_ms=60_000, clock=Clock())
    store.add(["a"], end_seq=5)
    store.add(["a"], end_seq=5)  # a crash after the dedup write, before the acks: done again
    assert len(os.listdir(tmp_path / "dedup")) == 1 and "a" in store


def test_many_segments_merge_into_one(tmp_path, monkeypatch):
    monkeypatch.setattr(rabbitmq_dedup, "MERGE_AFTER_SEGMENTS", 4)
    clock = Clock()
    store = DedupStore(str(tmp_path), retention_ms=60_000, clock=clock)
    for seq in range(1, 6):
        store.add([f"id{seq}"], end_seq=seq)
    assert os.listdir(tmp_path / "dedup") == ["base-00000000000000000005.arrow"]
    reloaded = DedupStore(str(tmp_path), retention_ms=60_000, clock=clock)
    assert all(f"id{s}" in reloaded for s in range(1, 6))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.text(min_size=1, max_size=4), max_size=5), max_size=8))
def test_store_remembers_exactly_what_was_added(tmp_path_factory, batches):
    path = tmp_path_factory.mktemp("dedup")
    clock = Clock()
    store = DedupStore(str(path), retention_ms=10**9, clock=clock)
    for seq, ids in enumerate(batches, 1):
        store.add(ids, end_seq=seq)
    added = {i for ids in batches for i in ids}
    reloaded = DedupStore(str(path), retention_ms=10**9, clock=clock)
    probe = added | {"never-added"}
    assert {i for i in probe if i in reloaded} == added
