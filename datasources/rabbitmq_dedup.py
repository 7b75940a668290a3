"""Durable store of committed message IDs, so redeliveries after a crash are dropped.

Each commit writes one segment ``<root>/dedup/seg-<end>.arrow`` holding the IDs of the
batches committed up to sequence number ``end`` and the commit time; segments are written
with :func:`durable_write`, so an ID is durable before any of its deliveries is acked.
An ID is remembered for ``retention`` after its commit: older segments are deleted, and
when many segments pile up they are merged into one (``base-<end>.arrow``). The whole
live set is kept in memory on the driver (one dict entry per ID within the retention).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import pyarrow as pa
import pyarrow.ipc as ipc

from jetspark.datasources.rabbitmq_wal import durable_write, list_files, open_location, table_to_ipc

DEDUP_DIR = "dedup"
SUFFIX = ".arrow"
MERGE_AFTER_SEGMENTS = 64
_SCHEMA = pa.schema([("id", pa.string()), ("committed_ms", pa.int64())])


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class DedupStore:
    """IDs committed within the retention, loaded from and appended to durable segments."""

    def __init__(self, location: str, retention_ms: int, clock: Callable[[], int] = _now_ms) -> None:
        self.retention_ms = retention_ms
        self._clock = clock
        self.fs, root = open_location(location)
        self.directory = f"{root}/{DEDUP_DIR}"
        self.fs.create_dir(self.directory, recursive=True)
        self._ids: dict[str, int] = {}
        self._segments: dict[str, int] = {}  # file name -> newest commit time in it
        self._load()

    def _load(self) -> None:
        for name in list_files(self.fs, self.directory, SUFFIX):
            with self.fs.open_input_file(f"{self.directory}/{name}") as f:
                table = ipc.open_file(f).read_all()
            ids = table.column("id").to_pylist()
            times = table.column("committed_ms").to_pylist()
            for i, t in zip(ids, times, strict=True):
                if self._ids.get(i, -1) < t:
                    self._ids[i] = t
            self._segments[name] = max(times, default=0)
        self.expire()

    def __contains__(self, message_id: str) -> bool:
        committed = self._ids.get(message_id)
        return committed is not None and committed >= self._clock() - self.retention_ms

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, ids: Iterable[str], end_seq: int) -> None:
        """Durably record ``ids`` as committed with the batches ending at ``end_seq``."""
        now = self._clock()
        id_list = [i for i in ids if i is not None]
        name = f"seg-{end_seq:020d}{SUFFIX}"
        table = pa.table(
            {"id": pa.array(id_list, pa.string()),
             "committed_ms": pa.array([now] * len(id_list), pa.int64())},
            schema=_SCHEMA,
        )
        durable_write(self.fs, f"{self.directory}/{name}", table_to_ipc(table))
        self._segments[name] = now
        for i in id_list:
            self._ids[i] = now
        self.expire()
        if len(self._segments) > MERGE_AFTER_SEGMENTS:
            self._merge(end_seq)

    def expire(self) -> None:
        """Forget IDs and delete segments older than the retention."""
        horizon = self._clock() - self.retention_ms
        old = [n for n, newest in self._segments.items() if newest < horizon]
        for name in old:
            self._delete(name)
        if old or any(t < horizon for t in self._ids.values()):
            self._ids = {i: t for i, t in self._ids.items() if t >= horizon}

    def _merge(self, end_seq: int) -> None:
        """Replace every segment by one holding the live set (crash-safe: IDs are a set)."""
        name = f"base-{end_seq:020d}{SUFFIX}"
        table = pa.table(
            {"id": pa.array(list(self._ids), pa.string()),
             "committed_ms": pa.array(list(self._ids.values()), pa.int64())},
            schema=_SCHEMA,
        )
        durable_write(self.fs, f"{self.directory}/{name}", table_to_ipc(table))
        newest = max(self._ids.values(), default=0)
        for old in [n for n in self._segments if n != name]:
            self._delete(old)
        self._segments[name] = newest

    def _delete(self, name: str) -> None:
        try:
            self.fs.delete_file(f"{self.directory}/{name}")
        except FileNotFoundError:
            pass
        self._segments.pop(name, None)
