"""One version source: pyproject.toml's version, as installed, is jetspark.__version__ and what
``jetspark --version`` prints; the package ships py.typed."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import jetspark
from jetspark.devtools import cli

ROOT = Path(__file__).resolve().parents[2]


def test_version_is_pyprojects():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" in project, "pyproject.toml must hold the version"
    assert jetspark.__version__ == project["version"]


def test_cli_prints_the_version(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"jetspark {jetspark.__version__} (PySpark 4.3")


def test_py_typed_is_shipped():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert (ROOT / "jetspark" / "py.typed").exists()
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["jetspark"]
