"""``jetspark demo`` in a short mode on the real services: its correctness check and its report."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_demo_short_mode_passes_its_check_and_writes_the_report(kafka_bootstrap, pg_dsn, pg_schema, tmp_path):
    report = tmp_path / "report"
    env = {**os.environ, "JETSPARK_KAFKA_BOOTSTRAP": kafka_bootstrap, "JETSPARK_PG_DSN": pg_dsn,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run(
        [sys.executable, "-m", "jetspark.cli", "demo", "--external", "--keep-services", "--records", "800",
         "--batches", "3", "--pg-schema", pg_schema, "--report-dir", str(report)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = run.stdout
    assert run.returncode == 0, out[-4000:] + run.stderr[-4000:]
    assert "check: PASSED" in out
    assert "table equals naive reference over the on-time events: True" in out
    assert "late records dropped by jetspark: 5 (injected: 5)" in out
    builtin = int(re.search(r"by Spark's built-in watermark .* on the same data: (\d+)", out).group(1))
    assert builtin > 5  # the global watermark drops the skewed partition's on-time records too
    assert re.search(r"malformed records: 4 \(produced: 4\) -> dead-letter table \S+", out)
    batch_lines = [line for line in out.splitlines() if re.match(r"\s+batch\s+\d+:", line)]
    assert len(batch_lines) >= 4 and any(line.endswith("idle") for line in batch_lines)

    with psycopg.connect(pg_dsn) as conn:
        tables = {name for (name,) in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (pg_schema,))}
        dead = next(t for t in tables if t.startswith("demo_dead_letters_"))
        windows = next(t for t in tables if t.startswith("demo_windows_"))
        raw = [v for (v,) in conn.execute(sql.SQL("SELECT raw_value FROM {}").format(
            sql.Identifier(pg_schema, dead)))]
        n_windows = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
            sql.Identifier(pg_schema, windows))).fetchone()[0]
    assert len(raw) == 4 and all("oops" in v for v in raw)
    assert f"windows written: {n_windows} " in out and n_windows > 0

    png, md = report / "watermarks.png", report / "summary.md"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    text = md.read_text()
    assert "table equals naive reference over the on-time events: True" in text and "watermarks.png" in text
