"""The run directory is private (0700, ours, not group/other-writable, not a symlink) and its
files are never written or truncated through a symlink."""

from __future__ import annotations

import os
import stat

import pytest

from jetspark.devtools.services import registry
from jetspark.devtools.services.files import open_nofollow, private_dir, write_nofollow
from jetspark.errors import ServiceError


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_created_0700_and_owned_by_us(tmp_path, monkeypatch):
    monkeypatch.setenv("JETSPARK_RUN_DIR", str(tmp_path / "a" / "run"))
    path = registry.run_dir()
    assert _mode(path) == (0o711 if os.getuid() == 0 else 0o700)
    assert os.lstat(path).st_uid == os.getuid()
    assert registry.run_dir() == path  # checked again on each use, and accepted


def test_an_existing_directory_of_ours_is_tightened(tmp_path):
    path = tmp_path / "run"
    path.mkdir(mode=0o755)
    os.chmod(path, 0o755)
    private_dir(path, 0o700)
    assert _mode(path) == 0o700


def test_a_symlink_is_refused(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "run").symlink_to(target)
    with pytest.raises(ServiceError, match="is a symlink"):
        private_dir(tmp_path / "run", 0o700)


@pytest.mark.parametrize("mode", [0o770, 0o757, 0o777])
def test_group_or_other_writable_is_refused(tmp_path, mode):
    path = tmp_path / "run"
    path.mkdir()
    os.chmod(path, mode)
    with pytest.raises(ServiceError, match="writable by group or others"):
        private_dir(path, 0o700)
    assert _mode(path) == mode  # left as found


def test_not_ours_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "run"
    path.mkdir(mode=0o700)
    monkeypatch.setattr(os, "getuid", lambda: os.lstat(path).st_uid + 1)
    with pytest.raises(ServiceError, match="not by us"):
        private_dir(path, 0o700)


def test_a_regular_file_is_refused(tmp_path):
    (tmp_path / "run").write_text("x")
    with pytest.raises(ServiceError, match="not a directory"):
        private_dir(tmp_path / "run", 0o700)


@pytest.mark.parametrize("mode", ["w", "ab"])
def test_files_are_not_opened_through_a_symlink(tmp_path, mode):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "services.lock").symlink_to(victim)
    with pytest.raises(OSError):
        open_nofollow(tmp_path / "services.lock", mode)
    with pytest.raises(OSError):
        write_nofollow(tmp_path / "services.lock", "x")
    assert victim.read_text() == "keep"


def test_files_are_written_0600(tmp_path):
    write_nofollow(tmp_path / "f", "one")
    write_nofollow(tmp_path / "f", "two")
    with open_nofollow(tmp_path / "f", "ab") as f:
        f.write(b"!")
    assert (tmp_path / "f").read_text() == "two!" and _mode(tmp_path / "f") == 0o600


def test_the_registry_uses_them(tmp_path):
    reg = registry.Registry(tmp_path)
    (tmp_path / "services.tmp").symlink_to(tmp_path / "victim")
    with pytest.raises(OSError):
        reg.save({})
    assert not (tmp_path / "victim").exists()
