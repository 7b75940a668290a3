"""The queue WAL, dedup and lease files are private: files 0600 in folders 0700, whatever the umask."""

from __future__ import annotations

import os
import stat

import pyarrow as pa

from jetspark.datasources.rabbitmq.dedup import DedupStore
from jetspark.datasources.rabbitmq.lease import Lease
from jetspark.datasources.rabbitmq.wal import WAL_SCHEMA, WalRange, WriteAheadLog


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_wal_dedup_and_lease_are_private_under_an_open_umask(tmp_path):
    root = tmp_path / "orders-wal"  # created by the source
    old = os.umask(0)  # the worst case: everything would be world-readable and writable
    try:
        lease = Lease(str(root), 60_000)
        lease.acquire()
        rows = pa.Table.from_pylist([{"message_id": "m1", "body": b"card 4111", "redelivered": False}],
                                    schema=WAL_SCHEMA)
        WriteAheadLog(str(root)).write(WalRange(0, 1, 1), rows)
        DedupStore(str(root), retention_ms=60_000).add(["m1"], end_seq=1)
        lease.release()
    finally:
        os.umask(old)
    dirs = [root, *(p for p in root.rglob("*") if p.is_dir())]
    files = [p for p in root.rglob("*") if p.is_file()]
    assert {p.name for p in dirs} >= {"orders-wal", "wal", "dedup", "lease"}
    assert any(p.suffix == ".arrow" for p in files) and len(files) >= 3
    assert {str(p.relative_to(tmp_path)): oct(_mode(p)) for p in dirs} == {
        str(p.relative_to(tmp_path)): "0o700" for p in dirs}
    assert {str(p.relative_to(tmp_path)): oct(_mode(p)) for p in files} == {
        str(p.relative_to(tmp_path)): "0o600" for p in files}
