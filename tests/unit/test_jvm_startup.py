"""The tests' class-data archive runs in every test JVM: its folder is private and an archive
planted by another user is never used (tests/jvm_startup.py)."""

from __future__ import annotations

import os
import stat

import pytest

from tests import jvm_startup

OTHER = 65534  # nobody


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setattr(jvm_startup, "_key", lambda: "k")


def _cache(tmp_path, owner: int = 0, mode: int = 0o755):
    cache = tmp_path / "cds"
    cache.mkdir()
    cache.chmod(mode)
    archive = cache / "spark-driver-k.jsa"
    archive.write_bytes(b"classes")
    archive.chmod(0o644)
    os.chown(cache, owner, owner)
    return cache, archive


def test_the_archive_folder_is_made_private(tmp_path):
    assert os.getuid() == 0, "run as root: the tests give files to another uid"
    cache, archive = _cache(tmp_path)
    assert jvm_startup.archive(cache) == archive
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700


@pytest.mark.parametrize("planted", ["archive of another user", "archive others can write",
                                     "folder of another user"])
def test_a_planted_archive_is_not_used(planted, tmp_path, capsys):
    cache, archive = _cache(tmp_path, owner=OTHER if planted == "folder of another user" else 0)
    if planted == "archive of another user":
        os.chown(archive, OTHER, OTHER)
    elif planted == "archive others can write":
        archive.chmod(0o666)
    assert jvm_startup.archive(cache) is None
    assert "no class-data archive" in capsys.readouterr().err
