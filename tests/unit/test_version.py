"""The version agrees everywhere it is written: pyproject.toml (the one source that
``jetspark.__version__`` and ``jetspark --version`` read once installed), the CHANGELOG's
latest released entry, and the pages that name the release a user upgrades to."""

from __future__ import annotations

import re
import tomllib

from tests.readme import ROOT

_RELEASE = re.compile(r"^## (\d+\.\d+\.\d+) — (\d{4}-\d{2}-\d{2})$", re.M)


def _version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_changelogs_latest_release_is_the_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    releases = _RELEASE.findall(text)
    assert releases, "CHANGELOG.md has no '## X.Y.Z — YYYY-MM-DD' entry"
    latest = releases[0][0]
    assert latest == _version(), f"CHANGELOG's latest release {latest} != pyproject's {_version()}"
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[0] in ("Unreleased", f"{_version()} — {releases[0][1]}"), headings[:2]


def test_pages_name_the_version_they_describe():
    version = _version()
    for page in ("docs/how-to/migrate-from-kafka.md", "docs/how-to/upgrade.md"):
        assert version in (ROOT / page).read_text(), f"{page} does not name {version}"


def test_the_package_keeps_no_version_of_its_own():
    assert not re.search(r"__version__\s*=\s*['\"]", (ROOT / "jetspark" / "__init__.py").read_text())
