"""The dated report of a `make soak` run: reports/soak-YYYY-MM-DD.md from its JUnit XML files.

Usage: python scripts/soak_report.py OUT.md RUN.xml [RUN.xml ...]
Each XML file is one pytest run (--junitxml): the report lists each run's counts, every case's
outcome and duration (slowest first), and the failures' messages, with the commit, the machine's
cores and its load average at the end.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
    return done.stdout.strip() or "(unknown)"


def _cases(path: Path) -> list[tuple[str, str, float, str]]:
    """(node id, outcome, seconds, message) of each case of one JUnit XML file."""
    rows = []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        outcome, message = "passed", ""
        for kind in ("failure", "error", "skipped"):
            found = case.find(kind)
            if found is not None:
                outcome, message = kind, " ".join((found.get("message") or "").split())[:300]
                break
        rows.append((name, outcome, float(case.get("time", 0)), message))
    return rows


def render(runs: list[Path]) -> str:
    lines = [f"# Soak run, {dt.datetime.now(dt.UTC).date().isoformat()}", "",
             f"- commit: `{_git('rev-parse', 'HEAD')}` ({_git('log', '-1', '--format=%s')[:100]})",
             f"- finished: {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}",
             f"- cores: {os.cpu_count()}; load average (1, 5, 15 min): "
             + ", ".join(f"{x:.2f}" for x in os.getloadavg()), ""]
    for run in runs:
        rows = _cases(run) if run.exists() else []
        counts = {k: sum(1 for r in rows if r[1] == k) for k in ("passed", "failure", "error", "skipped")}
        total = sum(r[2] for r in rows)
        lines += [f"## {run.stem}", "",
                  f"{counts['passed']} passed, {counts['failure']} failed, {counts['error']} errors, "
                  f"{counts['skipped']} skipped in {total / 60:.1f} min"
                  + ("" if run.exists() else f" (no {run.name}: the run did not finish)"), "",
                  "| case | outcome | seconds |", "|---|---|---|"]
        lines += [f"| `{name}` | {outcome} | {secs:.0f} |"
                  for name, outcome, secs, _ in sorted(rows, key=lambda r: -r[2])]
        failed = [(name, message) for name, outcome, _, message in rows if outcome in ("failure", "error")]
        if failed:
            lines += ["", "Failures:", ""] + [f"- `{name}`: {message}" for name, message in failed]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write(__doc__ or "")
        return 2
    out = Path(argv[0])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render([Path(a) for a in argv[1:]]))
    print(f"soak report: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
