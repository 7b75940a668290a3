"""Durable store of committed message IDs, so redeliveries after a crash are dropped.

Memory stays within a budget (``dedupMemory``) whatever the retention and the rate:

* Each commit writes one **segment**: ``<root>/dedup/seg-<end>.arrow`` holds the IDs of the
  batches committed up to sequence number ``end``, sorted, with their commit time, and
  ``seg-<end>.bloom`` its Bloom filter (written first: a segment exists once its ``.arrow``
  file does). Both go through :func:`durable_write`, so an ID is durable before any of its
  deliveries is acked.
* Only the Bloom filters live in memory. A lookup hashes the batch's IDs once (vectorized)
  and asks each live segment's filter; the few "maybe" answers are settled by a binary
  search of that segment's sorted IDs, memory-mapped for the lookup and unmapped after.
* All filters together fit the budget: a new filter gets 10 bits per ID (~1 % false
  positives); while the total exceeds the budget, the largest filter is folded to half its
  size (exact for power-of-two sizes): more "maybe"s settled by the binary search, never
  a wrong answer.
* Opening reads the filter files only (bounded by the budget), never the IDs.
* An ID counts for ``retention`` after its commit (checked exactly on a hit); a segment
  whose newest ID is older is deleted. Small segments are merged in groups
  (``merged-<end>.arrow``) so lookups ask a bounded number of filters.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jetspark.datasources.rabbitmq.bloom import MAX_BITS_PER_ID, BloomFilter, hash64
from jetspark.datasources.rabbitmq.wal import durable_write, list_files, read_ipc, table_to_ipc
from jetspark.filesystems import open_location
from jetspark.private_files import make_private_dir

DEDUP_DIR = "dedup"
SUFFIX = ".arrow"
BLOOM_SUFFIX = ".bloom"
MERGE_AFTER_SEGMENTS = 16
"""Small segments merged into one when this many exist."""
SMALL_SEGMENT_IDS = 1_000_000
"""Segments with fewer IDs count as small."""
DEFAULT_MEMORY_BYTES = 32 << 20
_SCHEMA = pa.schema([("id", pa.string()), ("committed_ms", pa.int64())])


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class Segment:
    name: str
    """File name of the IDs (``….arrow``)."""
    bloom: BloomFilter

    @property
    def end_seq(self) -> int:
        return int(self.name.split("-", 1)[1][: -len(SUFFIX)])

    @property
    def small(self) -> bool:
        return self.bloom.n < SMALL_SEGMENT_IDS


class _SortedIds:
    """Binary search over a segment's sorted IDs, straight on the Arrow buffers."""

    def __init__(self, table: pa.Table) -> None:
        self._ids = _single(table.column("id"))
        self._times = _single(table.column("committed_ms"))
        self._n = len(self._ids)

    def committed_ms(self, message_id: str) -> int | None:
        key = message_id
        ids = self._ids
        i = bisect.bisect_left(_Lazy(ids), key, 0, self._n)
        if i < self._n and ids[i].as_py() == key:
            return self._times[i].as_py()
        return None


def _single(col: pa.ChunkedArray) -> pa.Array:
    """The column as one array: its only chunk as it is (segments are written as one record
    batch; ``combine_chunks`` would copy the whole mapped column)."""
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


class _Lazy(Sequence):
    """A sorted Arrow string array seen as a Python sequence, element by element."""

    def __init__(self, arr: pa.Array) -> None:
        self._arr = arr

    def __len__(self) -> int:
        return len(self._arr)

    def __getitem__(self, i):  # bisect asks for single elements only
        return self._arr[i].as_py()


class DedupStore:
    """IDs committed within the retention, in durable sorted segments (see module doc)."""

    def __init__(self, location: str, retention_ms: int, clock: Callable[[], int] = _now_ms,
                 memory_bytes: int = DEFAULT_MEMORY_BYTES) -> None:
        self.retention_ms = retention_ms
        self.memory_bytes = memory_bytes
        self._clock = clock
        self.fs, root = open_location(location)
        self.directory = f"{root}/{DEDUP_DIR}"
        make_private_dir(self.fs, self.directory)
        self._segments: dict[str, Segment] = {}
        self._open()

    # -- lookups ---------------------------------------------------------------------------
    def contains_many(self, ids: Sequence[str]) -> np.ndarray:
        """A bool per ID: committed within the retention."""
        arr = np.asarray(list(ids), dtype=object)
        found = np.zeros(len(arr), bool)
        if not len(arr) or not self._segments:
            return found
        hashes = hash64(arr)
        horizon = self._clock() - self.retention_ms
        for seg in sorted(self._segments.values(), key=lambda s: -s.bloom.newest_ms):
            if seg.bloom.newest_ms < horizon:
                continue
            maybe = np.flatnonzero(seg.bloom.might_contain(hashes) & ~found)
            if not len(maybe):
                continue
            sorted_ids = _SortedIds(self._read(seg.name))
            for i in maybe:
                t = sorted_ids.committed_ms(arr[i])
                if t is not None and t >= horizon:
                    found[i] = True
        return found

    def __contains__(self, message_id: str) -> bool:
        return bool(self.contains_many([message_id])[0])

    def __len__(self) -> int:
        """IDs in live segments (an ID committed twice counts twice)."""
        return sum(s.bloom.n for s in self._segments.values())

    @property
    def memory_used(self) -> int:
        """Bytes of Bloom filters held in memory."""
        return sum(s.bloom.nbytes for s in self._segments.values())

    # -- writes ----------------------------------------------------------------------------
    def add(self, ids: Iterable[str], end_seq: int) -> None:
        """Durably record ``ids`` as committed with the batches ending at ``end_seq``."""
        now = self._clock()
        unique = pc.unique(pa.array([i for i in ids if i is not None], pa.string()))
        table = pa.table({"id": unique, "committed_ms": pa.repeat(pa.scalar(now, pa.int64()), len(unique))},
                         schema=_SCHEMA)
        self._write(f"seg-{end_seq:020d}{SUFFIX}", table)
        self.expire()
        small = sorted((s for s in self._segments.values() if s.small), key=lambda s: s.end_seq)
        if len(small) >= MERGE_AFTER_SEGMENTS:
            self._merge(small)

    def expire(self) -> None:
        """Delete segments whose newest ID is older than the retention."""
        horizon = self._clock() - self.retention_ms
        for name in [n for n, s in self._segments.items() if s.bloom.newest_ms < horizon]:
            self._delete(name)

    # -- internals -------------------------------------------------------------------------
    def _fit_budget(self) -> None:
        """Fold the largest filters until all fit ``memory_bytes``; persist the folded ones."""
        folded: set[str] = set()
        while self.memory_used > self.memory_bytes:
            largest = max(self._segments.values(), key=lambda s: s.bloom.nbytes)
            if largest.bloom.m <= 64:
                break
            largest.bloom.fold()
            folded.add(largest.name)
        for name in folded:
            durable_write(self.fs, self._bloom_path(name), self._segments[name].bloom.to_bytes())

    def _bloom_path(self, name: str) -> str:
        return f"{self.directory}/{name[: -len(SUFFIX)]}{BLOOM_SUFFIX}"

    def _write(self, name: str, table: pa.Table) -> None:
        table = table.sort_by("id")
        newest = pc.max(table.column("committed_ms")).as_py() or 0
        hashes = hash64(table.column("id").to_numpy(zero_copy_only=False))
        old = self._segments.pop(name, None)  # a rewrite (replayed commit) replaces it
        bloom = BloomFilter.build(hashes, MAX_BITS_PER_ID, newest)
        if old is not None and old.bloom.newest_ms > newest:
            bloom.newest_ms = old.bloom.newest_ms
        durable_write(self.fs, self._bloom_path(name), bloom.to_bytes())
        durable_write(self.fs, f"{self.directory}/{name}", table_to_ipc(table, max_chunksize=None))
        self._segments[name] = Segment(name, bloom)
        self._fit_budget()

    def _read(self, name: str) -> pa.Table:
        return read_ipc(self.fs, f"{self.directory}/{name}")

    def _open(self) -> None:
        names = list_files(self.fs, self.directory, SUFFIX)
        for name in names:
            try:
                with self.fs.open_input_stream(self._bloom_path(name)) as f:
                    bloom = BloomFilter.from_bytes(f.read())
            except FileNotFoundError:
                bloom = None
            if bloom is None:  # no or foreign filter: rebuild it once from the IDs
                self._write(name, self._read(name))
            else:
                self._segments[name] = Segment(name, bloom)
        for name in list_files(self.fs, self.directory, BLOOM_SUFFIX):  # filters of unwritten segments
            if f"{name[: -len(BLOOM_SUFFIX)]}{SUFFIX}" not in self._segments:
                self._remove(name)
        self.expire()
        self._fit_budget()  # the budget may have been lowered since

    def _merge(self, small: list[Segment]) -> None:
        """Replace ``small`` by one segment (crash-safe: IDs are a set, duplicates harmless)."""
        tables = [self._read(s.name) for s in small]
        merged = pa.concat_tables(tables).group_by("id").aggregate([("committed_ms", "max")])
        merged = merged.rename_columns(["id", "committed_ms"]).cast(_SCHEMA)
        name = f"merged-{small[-1].end_seq:020d}{SUFFIX}"
        self._write(name, merged)
        for s in small:
            if s.name != name:  # the output may replace an input of the same name
                self._delete(s.name)

    def _delete(self, name: str) -> None:
        self._remove(name)
        self._remove(self._bloom_path(name).rsplit("/", 1)[1])
        self._segments.pop(name, None)

    def _remove(self, name: str) -> None:
        try:
            self.fs.delete_file(f"{self.directory}/{name}")
        except FileNotFoundError:
            pass
