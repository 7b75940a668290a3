"""The write-ahead log of the ``jetrabbitmq`` source: one durable Arrow file per batch.

A batch covers the sequence numbers ``[start, end)`` and is stored as
``<root>/wal/<start>-<end>-<epoch>.arrow`` (Arrow IPC file format), ``epoch`` being the lease
epoch of the driver that wrote it (:mod:`.lease`): two writers never share a file name.
Writes are durable before they return: on a local filesystem the file is written to a temporary name, fsynced,
renamed and the directory fsynced; on other pyarrow filesystems (S3, GCS, HDFS, …) a
file exists only once its output stream is closed, which is the store's durability point.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.ipc as ipc

from jetspark.columns import LATE, TIMESTAMP_TYPE
from jetspark.filesystems import open_location
from jetspark.private_files import make_private_dir, open_private

WAL_DIR = "wal"
SUFFIX = ".arrow"

WAL_SCHEMA = pa.schema(
    [
        ("message_id", pa.string()),
        ("body", pa.binary()),
        ("routing_key", pa.string()),
        ("exchange", pa.string()),
        ("headers", pa.map_(pa.string(), pa.string())),
        ("timestamp", TIMESTAMP_TYPE),
        ("redelivered", pa.bool_()),
        ("event_time_ms", pa.int64()),
        (LATE, pa.bool_()),
    ]
)


def durable_write(fs: pafs.FileSystem, path: str, data: bytes | pa.Buffer) -> None:
    """Write ``data`` to ``path`` atomically and durably (see module doc)."""
    if isinstance(fs, pafs.LocalFileSystem):
        directory = os.path.dirname(path)
        tmp = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
        with open_private(tmp) as f:
            f.write(memoryview(data))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(directory)
    else:
        with fs.open_output_stream(path) as out:
            out.write(data)


def fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def table_to_ipc(table: pa.Table, max_chunksize: int | None = 65_536) -> pa.Buffer:
    """The table in Arrow's IPC file format (``max_chunksize`` None: one record batch)."""
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table.combine_chunks() if max_chunksize is None else table,
                           max_chunksize=max_chunksize)
    return sink.getvalue()


def read_ipc(fs: pafs.FileSystem, path: str) -> pa.Table:
    """An Arrow IPC file as a table; memory-mapped on a local filesystem (unread columns and
    rows cost nothing, and the pages go when the table does)."""
    if isinstance(fs, pafs.LocalFileSystem):
        with pa.memory_map(path) as f:
            return ipc.open_file(f).read_all()
    with fs.open_input_file(path) as f:
        return ipc.open_file(f).read_all()


def list_files(fs: pafs.FileSystem, directory: str, suffix: str) -> list[str]:
    """Base names in ``directory`` ending in ``suffix`` (none when it does not exist)."""
    infos = fs.get_file_info(pafs.FileSelector(directory, allow_not_found=True))
    return sorted(
        i.base_name for i in infos
        if i.type == pafs.FileType.File and i.base_name.endswith(suffix) and not i.base_name.startswith(".")
    )


@dataclass(frozen=True, order=True)
class WalRange:
    """The sequence numbers ``[start, end)`` of one WAL file, written under lease ``epoch``."""

    start: int
    end: int
    epoch: int = 0

    @property
    def file_name(self) -> str:
        return f"{self.start:020d}-{self.end:020d}-{self.epoch:020d}{SUFFIX}"

    @classmethod
    def from_file_name(cls, name: str) -> WalRange:
        """From ``<start>-<end>-<epoch>.arrow``, or ``<start>-<end>.arrow`` (epoch 0: before leases)."""
        parts = [int(p) for p in name[: -len(SUFFIX)].split("-")]
        return cls(parts[0], parts[1], parts[2] if len(parts) > 2 else 0)


class WriteAheadLog:
    """Durable per-batch storage of the deliveries a batch is made of."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.fs, root = open_location(location)
        self.directory = f"{root}/{WAL_DIR}"
        self._created = False

    def __getstate__(self) -> dict:
        return {"location": self.location}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["location"])

    def _path(self, r: WalRange) -> str:
        return f"{self.directory}/{r.file_name}"

    def write(self, r: WalRange, table: pa.Table) -> None:
        """Store the rows of ``r`` (``end - start`` rows, WAL_SCHEMA); durable on return."""
        if table.num_rows != r.end - r.start:
            raise ValueError(f"WAL range {r} needs {r.end - r.start} rows, got {table.num_rows}")
        if not self._created:
            make_private_dir(self.fs, self.directory)
            self._created = True
        durable_write(self.fs, self._path(r), table_to_ipc(table.cast(WAL_SCHEMA)))

    def ranges(self) -> list[WalRange]:
        """Every stored range, in order."""
        return [WalRange.from_file_name(n) for n in list_files(self.fs, self.directory, SUFFIX)]

    def read(self, r: WalRange, columns: list[str] | None = None) -> pa.Table:
        table = read_ipc(self.fs, self._path(r))
        return table.select(columns) if columns else table

    def iter_batches(self, r: WalRange, first: int, last: int):
        """The record batches of file ``r`` with indexes ``first <= i < last``."""
        with self.fs.open_input_file(self._path(r)) as f:
            reader = ipc.open_file(f)
            for i in range(first, min(last, reader.num_record_batches)):
                yield reader.get_batch(i)

    def num_record_batches(self, r: WalRange) -> int:
        with self.fs.open_input_file(self._path(r)) as f:
            return ipc.open_file(f).num_record_batches

    def delete(self, ranges: list[WalRange]) -> None:
        for r in ranges:
            try:
                self.fs.delete_file(self._path(r))
            except FileNotFoundError:
                pass
