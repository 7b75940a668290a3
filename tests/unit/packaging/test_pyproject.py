"""pyproject.toml lists every folder that ships: setuptools warns ("Package would be ignored")
for a folder under a package that is not listed itself, and may leave its files out."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_folder_under_a_package_is_a_listed_package():
    config = _setuptools()
    listed = set(config["packages"])
    dirs = {name: ROOT / path for name, path in config["package-dir"].items() if name}
    missing = []
    for package in sorted(listed):
        root_name = max((n for n in dirs if package == n or package.startswith(n + ".")), key=len)
        folder = dirs[root_name].joinpath(*package[len(root_name):].split(".")[1:])
        assert folder.is_dir(), f"{package}: {folder} does not exist"
        missing += [f"{package}.{child.name}" for child in folder.iterdir()
                    if child.is_dir() and child.name != "__pycache__" and any(child.iterdir())
                    and f"{package}.{child.name}" not in listed]
    assert missing == []


def test_data_files_are_declared_on_their_own_package():
    config = _setuptools()
    data = config["package-data"]
    assert set(data) <= set(config["packages"])
    assert data["jetspark.devtools.services.resources"] == ["*.xml"]
