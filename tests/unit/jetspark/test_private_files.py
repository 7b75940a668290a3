"""The queue WAL, dedup and lease files are private: files 0600 in folders 0700, whatever the umask."""

from __future__ import annotations

import os
import stat

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from jetspark.datasources.rabbitmq.dedup import DedupStore
from jetspark.datasources.rabbitmq.lease import Lease
from jetspark.datasources.rabbitmq.wal import WAL_SCHEMA, WalRange, WriteAheadLog
from jetspark.errors import JetsparkError
from jetspark.private_files import UnsafeFolderError, make_private_dir, open_private


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


# --- never through a symlink, never another user's folder ------------------------------------------

def _planted(tmp_path):
    """A file of 'someone else' (stands for /etc/passwd) and a shared folder (stands for /tmp)."""
    victim = tmp_path / "victim"
    victim.write_text("root:x:0:0\n")
    victim.chmod(0o644)
    shared = tmp_path / "shared"
    shared.mkdir()
    return victim, shared


@pytest.mark.parametrize("link", ["orders-wal/lease", "orders-wal"])
def test_a_planted_symlink_is_refused_and_its_target_untouched(link, tmp_path):
    victim, shared = _planted(tmp_path)
    if link != "orders-wal":
        (shared / "orders-wal").mkdir()
    (shared / link).symlink_to(victim)
    with pytest.raises(UnsafeFolderError, match="is a symlink") as err:
        make_private_dir(pafs.LocalFileSystem(), str(shared / "orders-wal" / "lease"))
    assert isinstance(err.value, JetsparkError)
    assert _mode(victim) == 0o644
    assert (shared / link).is_symlink()


def test_a_planted_symlink_to_a_folder_is_refused(tmp_path):
    _victim, shared = _planted(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    elsewhere.chmod(0o755)
    (shared / "orders-wal").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UnsafeFolderError, match="is a symlink"):
        make_private_dir(pafs.LocalFileSystem(), str(shared / "orders-wal"))
    assert _mode(elsewhere) == 0o755


def test_the_wal_refuses_a_planted_lease_link(tmp_path):
    victim, shared = _planted(tmp_path)
    (shared / "orders-wal").mkdir()
    (shared / "orders-wal" / "lease").symlink_to(victim)
    with pytest.raises(UnsafeFolderError):
        Lease(str(shared / "orders-wal"), 60_000).acquire()
    assert _mode(victim) == 0o644


def test_another_users_folder_or_link_is_refused(tmp_path):
    fs = pafs.LocalFileSystem()
    if os.getuid() != 0:  # a folder we cannot chown: the root folder, owned by root
        with pytest.raises(UnsafeFolderError, match="owned by uid 0"):
            make_private_dir(fs, "/")
        return
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 65534, 65534)
    with pytest.raises(UnsafeFolderError, match="owned by uid 65534"):
        make_private_dir(fs, str(theirs))
    assert _mode(theirs) == 0o755
    target = tmp_path / "mine"
    target.mkdir()
    link = tmp_path / "their-link"
    link.symlink_to(target, target_is_directory=True)
    os.lchown(link, 65534, 65534)
    with pytest.raises(UnsafeFolderError, match="symlink of uid 65534"):
        make_private_dir(fs, str(link / "wal"))
    assert not (target / "wal").exists()


def test_a_private_file_is_never_written_through_a_link(tmp_path):
    victim, shared = _planted(tmp_path)
    (shared / "x.tmp").symlink_to(victim)
    with pytest.raises(OSError):
        open_private(str(shared / "x.tmp"))
    assert victim.read_text() == "root:x:0:0\n"
