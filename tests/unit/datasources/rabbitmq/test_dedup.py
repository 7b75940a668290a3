"""The durable dedup store: IDs survive a restart, expire after the retention, merge."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from jetspark.datasources.rabbitmq import dedup as rabbitmq_dedup
from jetspark.datasources.rabbitmq.dedup import DedupStore


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
        "seg-00000000000000000002.arrow", "seg-00000000000000000002.bloom",
        "seg-00000000000000000003.arrow", "seg-00000000000000000003.bloom"]
    reloaded = DedupStore(str(tmp_path), retention_ms=60_000, clock=clock)
    assert "old" not in reloaded and "new" in reloaded and "newer" in reloaded


def test_rewriting_a_segment_is_idempotent(tmp_path):
    store = DedupStore(str(tmp_path), retention_ms=60_000, clock=Clock())
    store.add(["a"], end_seq=5)
    store.add(["a"], end_seq=5)  # a crash after the dedup write, before the acks: done again
    assert len(os.listdir(tmp_path / "dedup")) == 2 and "a" in store  # its IDs and its filter


def test_many_segments_merge_into_one(tmp_path, monkeypatch):
    monkeypatch.setattr(rabbitmq_dedup, "MERGE_AFTER_SEGMENTS", 4)
    clock = Clock()
    store = DedupStore(str(tmp_path), retention_ms=60_000, clock=clock)
    for seq in range(1, 6):
        store.add([f"id{seq}"], end_seq=seq)
    assert sorted(os.listdir(tmp_path / "dedup")) == [
        "merged-00000000000000000004.arrow", "merged-00000000000000000004.bloom",
        "seg-00000000000000000005.arrow", "seg-00000000000000000005.bloom"]
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


def test_memory_stays_within_the_budget_and_answers_stay_exact(tmp_path):
    """With more IDs than the budget holds at 10 bits each, filters get fewer bits: more
    false "maybe"s settled on disk, never a wrong answer."""
    budget = 1 << 20
    store = DedupStore(str(tmp_path), retention_ms=10**9, clock=Clock(), memory_bytes=budget)
    for seq in range(1, 9):
        store.add([f"id-{seq}-{i}" for i in range(200_000)], end_seq=seq)
    assert len(store) == 1_600_000
    assert store.memory_used <= budget  # 10 bits/ID would take 2 MB
    reopened = DedupStore(str(tmp_path), retention_ms=10**9, clock=Clock(), memory_bytes=budget)
    probe = [f"id-{s}-{i}" for s in (1, 8) for i in range(0, 200_000, 997)] + [f"no-{i}" for i in range(500)]
    expected = [not p.startswith("no-") for p in probe]
    assert reopened.contains_many(probe).tolist() == expected


def test_a_filter_of_another_hash_is_rebuilt_not_trusted(tmp_path):
    store = DedupStore(str(tmp_path), retention_ms=60_000, clock=Clock())
    store.add(["a", "b"], end_seq=1)
    bloom = tmp_path / "dedup" / "seg-00000000000000000001.bloom"
    bloom.write_bytes(b"JSBLOOM1" + b"\0" * 40)  # a header whose probe hash does not match
    reopened = DedupStore(str(tmp_path), retention_ms=60_000, clock=Clock())
    assert "a" in reopened and "b" in reopened and "c" not in reopened


@settings(max_examples=50, deadline=None)
@given(st.sets(st.text(max_size=8), max_size=300), st.sets(st.text(max_size=8), max_size=300),
       st.floats(0.5, 10))
def test_bloom_filter_has_no_false_negatives(added, others, bits_per_id):
    from jetspark.datasources.rabbitmq.bloom import BloomFilter, hash64

    f = BloomFilter.build(hash64(sorted(added)), bits_per_id, 0)
    again = BloomFilter.from_bytes(f.to_bytes())
    assert again is not None
    assert again.might_contain(hash64(sorted(added))).all()
    assert len(again.might_contain(hash64(sorted(others)))) == len(others)


@settings(max_examples=50, deadline=None)
@given(st.sets(st.text(max_size=8), max_size=300), st.integers(0, 6))
def test_a_folded_bloom_filter_still_has_no_false_negatives(added, folds):
    from jetspark.datasources.rabbitmq.bloom import BloomFilter, hash64

    hashes = hash64(sorted(added))
    f = BloomFilter.build(hashes, 10, 0)
    for _ in range(folds):
        f.fold()
    assert f.might_contain(hashes).all()


def test_a_filter_s_k_is_bounded_not_trusted(tmp_path):
    """k sets each lookup's work and memory (k x IDs positions): a file's k of 2**31 is not a
    filter of ours, and the segment's filter is rebuilt from its IDs."""
    from jetspark.datasources.rabbitmq.bloom import _HEADER, BloomFilter

    store = DedupStore(str(tmp_path), retention_ms=60_000, clock=Clock())
    store.add(["a", "b"], end_seq=1)
    path = tmp_path / "dedup" / "seg-00000000000000000001.bloom"
    data = bytearray(path.read_bytes())
    magic, m, _k, n, newest, probe = _HEADER.unpack_from(data)
    for k in (2**31, 0, 33):
        _HEADER.pack_into(data, 0, magic, m, k, n, newest, probe)
        assert BloomFilter.from_bytes(bytes(data)) is None, k
    path.write_bytes(bytes(data))
    reopened = DedupStore(str(tmp_path), retention_ms=60_000, clock=Clock())
    assert "a" in reopened and "b" in reopened and "c" not in reopened
    assert BloomFilter.from_bytes(path.read_bytes()).k == 7
