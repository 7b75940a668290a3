"""The queue WAL, dedup and lease files are private: files 0600 in folders 0700, whatever the umask."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from jetspark.datasources.rabbitmq.dedup import DedupStore
from jetspark.datasources.rabbitmq.lease import Lease
from jetspark.datasources.rabbitmq.wal import WAL_SCHEMA, WalRange, WriteAheadLog, table_to_ipc
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


# --- a path another user can change after the check is refused ----------------------------------

ATTACKER = 65534  # nobody: an unprivileged user of the same host


def _as_attacker(action) -> bool:
    """Run ``action`` in a child process as uid/gid ``ATTACKER``; did it succeed?"""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.setgroups([])
            os.setgid(ATTACKER)
            os.setuid(ATTACKER)
            action()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


@pytest.fixture
def host():
    """A folder every user can enter (pytest's own are 0700), with an attacker's folder in it,
    a world-writable sticky one (like /tmp) and a world-writable one without the sticky bit."""
    assert os.getuid() == 0, "these tests give folders to another uid and act as it: run as root"
    base = tempfile.mkdtemp(prefix="jetspark-shared-host-")
    os.chmod(base, 0o755)
    theirs = os.path.join(base, "theirs")
    os.mkdir(theirs)
    os.chown(theirs, ATTACKER, ATTACKER)
    for name, mode in (("sticky", 0o1777), ("open", 0o777)):
        os.mkdir(os.path.join(base, name))
        os.chmod(os.path.join(base, name), mode)
    yield base
    shutil.rmtree(base)


def _rows() -> pa.Table:
    return pa.Table.from_pylist([{"message_id": "m1", "body": b"card 4111", "redelivered": False}],
                                schema=WAL_SCHEMA)


def _swap(folder: str, planted: str) -> None:
    """The attacker's move: our folder renamed away, a link to theirs in its place."""
    os.rename(folder, folder + ".old")
    os.symlink(planted, folder)


@pytest.mark.parametrize("parent", ["theirs", "open", "sticky/theirs"])
def test_the_wal_cannot_be_swapped_under_a_parent_another_user_can_change(parent, host):
    if parent == "sticky/theirs":  # /tmp/<their folder>/orders-wal
        os.mkdir(os.path.join(host, parent))
        os.chown(os.path.join(host, parent), ATTACKER, ATTACKER)
    root = os.path.join(host, parent, "orders-wal")
    planted = os.path.join(host, "theirs", "planted")
    forged = WalRange(0, 1, 1)
    wal = WriteAheadLog(root)
    try:
        wal.write(WalRange(1, 2, 1), _rows())
    except UnsafeFolderError as e:
        assert "owned by uid 65534" in str(e) or "without the sticky bit" in str(e)
        assert not os.path.exists(os.path.join(root, "wal"))
        return

    def plant() -> None:  # a folder of theirs holding a WAL range they forged
        os.makedirs(os.path.join(planted, "wal"))
        with open(os.path.join(planted, "wal", forged.file_name), "wb") as f:
            f.write(table_to_ipc(pa.Table.from_pylist(
                [{"message_id": "forged", "body": b"x", "redelivered": False}], schema=WAL_SCHEMA)))
        _swap(root, planted)

    assert _as_attacker(plant), "the attacker could not swap the folder"
    wal.write(WalRange(2, 3, 1), _rows())
    assert os.listdir(os.path.join(planted, "wal")) == [forged.file_name], "a body written to their folder"
    assert forged not in wal.ranges(), "a forged WAL range was read as ours"


@pytest.mark.parametrize("store", ["lease", "dedup"])
def test_the_lease_and_dedup_refuse_a_parent_of_another_user(store, host):
    root = os.path.join(host, "theirs", "orders-wal")
    with pytest.raises(UnsafeFolderError, match="owned by uid 65534"):
        if store == "lease":
            Lease(root, 60_000).acquire()
        else:
            DedupStore(root, retention_ms=60_000)
    assert not os.path.exists(root)


def test_a_folder_of_ours_in_a_sticky_shared_folder_is_kept_and_cannot_be_swapped(host):
    root = os.path.join(host, "sticky", "orders-wal")
    wal = WriteAheadLog(root)
    wal.write(WalRange(0, 1, 1), _rows())
    assert not _as_attacker(lambda: _swap(root, os.path.join(host, "theirs"))), \
        "the sticky bit should keep another user from renaming our folder"
    wal.write(WalRange(1, 2, 1), _rows())
    assert wal.ranges() == [WalRange(0, 1, 1), WalRange(1, 2, 1)]
    assert _mode(root) == 0o700 and os.stat(root).st_uid == os.getuid()


def test_a_link_of_ours_to_a_folder_another_user_can_change_is_refused(host):
    link = os.path.join(host, "sticky", "to-theirs")
    os.symlink(os.path.join(host, "theirs"), link)
    with pytest.raises(UnsafeFolderError, match="owned by uid 65534"):
        make_private_dir(pafs.LocalFileSystem(), os.path.join(link, "orders-wal"))
