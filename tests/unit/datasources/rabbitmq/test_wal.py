"""The jetrabbitmq write-ahead log: durable per-batch Arrow files on any pyarrow filesystem."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

from jetspark.datasources.rabbitmq.wal import WAL_SCHEMA, WalRange, WriteAheadLog, durable_write


def _rows(n: int, first: int = 0) -> pa.Table:
    ids = [f"m{first + i}" for i in range(n)]
    return pa.table({
        "message_id": ids,
        "body": [i.encode() for i in ids],
        "routing_key": ["rk"] * n,
        "exchange": [""] * n,
        "headers": pa.array([[("k", str(i))] for i in range(n)], WAL_SCHEMA.field("headers").type),
        "timestamp": pa.array([1_000_000 * i for i in range(n)], pa.int64()).cast(pa.timestamp("us", "UTC")),
        "redelivered": [False] * n,
        "event_time_ms": np.arange(n, dtype=np.int64),
        "late": [False] * n,
    }, schema=WAL_SCHEMA)


@pytest.mark.parametrize("location", ["local", "file", "mock:///jet/wal"])
def test_write_list_read_delete(tmp_path, location):
    loc = {"local": str(tmp_path / "wal"), "file": f"file://{tmp_path}/wal"}.get(location, location)
    wal = WriteAheadLog(loc)
    assert wal.ranges() == []
    wal.write(WalRange(0, 3), _rows(3))
    wal.write(WalRange(3, 8), _rows(5, 3))
    assert wal.ranges() == [WalRange(0, 3), WalRange(3, 8)]
    assert wal.read(WalRange(3, 8), ["message_id"]).column(0).to_pylist() == [f"m{i}" for i in range(3, 8)]
    batches = list(wal.iter_batches(WalRange(0, 3), 0, wal.num_record_batches(WalRange(0, 3))))
    assert pa.Table.from_batches(batches).equals(_rows(3))
    wal.delete([WalRange(0, 3), WalRange(99, 100)])  # a missing file is no error
    assert wal.ranges() == [WalRange(3, 8)]


def test_row_count_must_match_the_range(tmp_path):
    with pytest.raises(ValueError, match="needs 2 rows"):
        WriteAheadLog(str(tmp_path)).write(WalRange(0, 2), _rows(3))


def test_large_batches_split_into_record_batches(tmp_path):
    wal = WriteAheadLog(str(tmp_path))
    wal.write(WalRange(0, 70_000), _rows(70_000))
    assert wal.num_record_batches(WalRange(0, 70_000)) == 2
    second = list(wal.iter_batches(WalRange(0, 70_000), 1, 2))
    assert sum(b.num_rows for b in second) == 70_000 - 65_536


def test_local_write_is_atomic_and_leaves_no_temp_files(tmp_path, monkeypatch):
    from pyarrow.fs import LocalFileSystem

    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    durable_write(LocalFileSystem(), str(tmp_path / "f"), b"abc")
    assert (tmp_path / "f").read_bytes() == b"abc"
    assert len(synced) == 2  # the file, then its directory
    assert os.listdir(tmp_path) == ["f"]


def test_wal_pickles_by_location(tmp_path):
    import pickle

    wal = WriteAheadLog(str(tmp_path))
    wal.write(WalRange(0, 1), _rows(1))
    assert pickle.loads(pickle.dumps(wal)).ranges() == [WalRange(0, 1)]


def test_file_names_carry_the_lease_epoch_and_old_names_read_as_epoch_0():
    r = WalRange(3, 8, 2)
    assert WalRange.from_file_name(r.file_name) == r
    assert WalRange.from_file_name(f"{3:020d}-{8:020d}.arrow") == WalRange(3, 8, 0)
