"""The set-up scripts write no file under a fixed name in the shared temporary folder: there
another local user can plant a link first, and the script (run as root by CI and
``make test``'s set-up) would write through it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FIXED_TEMP_NAME = re.compile(r"(?<![\w$}])/tmp/[\w.-]+")


def _scripts() -> list[Path]:
    return [*sorted((ROOT / "scripts").glob("*.sh")), ROOT / ".ci" / "run"]


def test_set_up_scripts_name_no_fixed_file_in_the_shared_temp_folder():
    found = []
    for script in _scripts():
        for n, line in enumerate(script.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if FIXED_TEMP_NAME.search(code) and "replace(" not in code:
                found.append(f"{script.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "fixed names in the shared temp folder (use mktemp):\n" + "\n".join(found)
