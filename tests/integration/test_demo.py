"""``jetspark demo`` in a short mode on the real services: its correctness check and its report."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from jetspark.devtools.demo.events import LAG_S, generate, split_phases
from tests.pictures import check_watermark_picture

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RECORDS, PARTITIONS, DURATION_S = 800, 4, 120  # the demo's --partitions and --duration defaults
WINDOW_MS, SLIDE_MS = 30_000, 10_000  # jetspark.devtools.demo.report's WINDOW and SLIDE


def expected_run(start_ms: int) -> tuple[int, int, int]:
    """From the generator alone: (t0 ms, final watermark ms, windows it closes).

    The last partition is idle in the second phase, so the final W is the least of the other
    partitions' greatest record timestamps (partition 1's, 45 s behind) minus the lag; the
    table holds every (vehicle, 30 s window sliding by 10 s) with an on-time, valid event
    that ends by then.
    """
    records = generate(RECORDS, PARTITIONS, DURATION_S, start_ms=start_ms)
    produced = [r for phase in split_phases(records, PARTITIONS) for r in phase]
    newest = [max(r.ts for r in produced if r.partition == p) for p in range(PARTITIONS - 1)]
    final_w = min(newest) - LAG_S * 1000
    windows = {(r.vehicle, (r.ts // SLIDE_MS - k) * SLIDE_MS) for r in produced if r.vehicle and not r.late
               for k in range(WINDOW_MS // SLIDE_MS)}
    return min(r.ts for r in records), final_w, sum(start + WINDOW_MS <= final_w for _, start in windows)


@pytest.mark.timeout(900)  # the demo subprocess alone may take its 300 s
def test_demo_short_mode_passes_its_check_and_writes_the_report(kafka_bootstrap, pg_dsn, pg_schema, tmp_path):
    report = tmp_path / "report"
    start_ms = int(time.time() * 1000) - (DURATION_S + 120) * 1000  # recent: Kafka's retention keeps it
    t0_ms, final_w, n_expected = expected_run(start_ms)
    env = {**os.environ, "JETSPARK_KAFKA_BOOTSTRAP": kafka_bootstrap, "JETSPARK_PG_DSN": pg_dsn,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run(
        [sys.executable, "-m", "jetspark.devtools.cli", "demo", "--external", "--keep-services",
         "--records", str(RECORDS), "--partitions", str(PARTITIONS), "--duration", str(DURATION_S),
         "--start-ms", str(start_ms),
         "--batches", "3", "--pg-schema", pg_schema, "--report-dir", str(report)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = run.stdout
    assert run.returncode == 0, out[-4000:] + run.stderr[-4000:]
    assert "check: PASSED" in out
    # the terminal gets the demo's lines only; Spark's output goes to the log it names
    spark_lines = [line for line in (out + run.stderr).splitlines() if re.search(
        r"\bWARN|ERROR|log4j|Failed to delete timer|TransformWithState|jetkafka reader", line)]
    assert not spark_lines, spark_lines[:10]
    log = Path(re.search(r"^log: (\S+) ", out, re.M).group(1))
    assert log == report / "spark.log"
    spark_log = log.read_text()
    assert "jetkafka reader: " in spark_log  # the Python workers' stderr is in the log
    assert "Failed to delete timer" not in spark_log  # a timer is deleted only while registered
    assert "replaced a statically registered data source" not in spark_log  # registered once
    assert "table equals naive reference over the on-time events: True" in out
    assert "late records dropped by jetspark: 5 (injected: 5)" in out
    builtin = int(re.search(r"by Spark's built-in watermark .* on the same data: (\d+)", out).group(1))
    assert builtin > 5  # the global watermark drops the skewed partition's on-time records too
    assert re.search(r"malformed records: 4 \(produced: 4\) -> dead-letter table \S+", out)
    batch_lines = [line for line in out.splitlines() if re.match(r"\s+batch\s+\d+:", line)]
    assert len(batch_lines) >= 4 and any(line.endswith("idle") for line in batch_lines)
    # the final W is the lagging partition's (the idle one no longer holds it back)
    final = re.search(r"\| W (\S+) \|", batch_lines[-1]).group(1)
    assert final == f"+{(final_w - t0_ms) / 1000:.1f}s", batch_lines
    assert re.search(rf"\bp{PARTITIONS - 1} \S+ idle$", batch_lines[-1]), batch_lines[-1]
    assert re.search(rf"windows written: {n_expected} to \S+ \(exactly-once\); "
                     rf"reference windows closed by the final watermark: {n_expected}\n", out), out[-3000:]

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
    assert n_windows == n_expected

    png, md = report / "watermarks.png", report / "summary.md"
    check_watermark_picture(png, partitions=PARTITIONS)
    text = md.read_text()
    assert "table equals naive reference over the on-time events: True" in text and "watermarks.png" in text
