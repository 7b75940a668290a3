"""The demo pipeline submitted to a standalone cluster writes the same windows as on local[2]."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import confluent_kafka
import psycopg
import pytest
from psycopg import sql

from jetspark.devtools.services import local

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DURATION_S = 120
DEMO_ARGS = ["--external", "--keep-services", "--records", "800", "--batches", "3",
             "--duration", str(DURATION_S)]


def _env(kafka_bootstrap: str, pg_dsn: str) -> dict[str, str]:
    return {**os.environ, "JETSPARK_KAFKA_BOOTSTRAP": kafka_bootstrap, "JETSPARK_PG_DSN": pg_dsn,
            "PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def _windows(pg_dsn: str, out: str) -> list[tuple]:
    assert "check: PASSED" in out, out[-4000:]
    schema, table = re.search(r"windows written: \d+ to (\S+)\.(\S+) ", out).groups()
    with psycopg.connect(pg_dsn) as conn:
        return conn.execute(sql.SQL(
            "SELECT vehicle, window_start, window_end, n, mean_speed, slope FROM {} ORDER BY 1, 2"
        ).format(sql.Identifier(schema, table))).fetchall()


def _executor_logs(since: float) -> str:
    """The stderr of the local cluster's executors (Python workers included) written since ``since``."""
    work = Path(local.status()["spark"].data_dir)
    files = [f for f in work.glob("work-*/app-*/*/stderr") if f.stat().st_mtime >= since]
    assert files, f"no executor log under {work}"
    return "\n".join(f.read_text(errors="replace") for f in files)


@pytest.mark.soak  # the suite's time budget; the cluster path: test_spark_cluster.py in make test
@pytest.mark.soak_only  # a cluster and two demo runs, longer than a slice's budget: make soak only
@pytest.mark.timeout(1800)  # a cluster start, a local run (300 s) and a submitted one (600 s)
def test_demo_submitted_to_a_cluster_equals_the_local_run(spark_master, kafka_bootstrap, pg_dsn, pg_schema,
                                                          tmp_path):
    start_ms = int(time.time() * 1000) - (DURATION_S + 120) * 1000  # the same events in both runs
    args = [*DEMO_ARGS, "--pg-schema", pg_schema, "--start-ms", str(start_ms)]
    env = _env(kafka_bootstrap, pg_dsn)

    local = subprocess.run(
        [sys.executable, "-m", "jetspark.devtools.cli", "demo", *args,
         "--report-dir", str(tmp_path / "local")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert local.returncode == 0, local.stdout[-4000:] + local.stderr[-4000:]
    assert re.findall(r"^spark: (.*)$", local.stdout, re.M) == ["local[2]"], local.stdout[-3000:]

    submit = Path(sys.executable).parent / "spark-submit"
    submitted = time.time() - 1
    cluster = subprocess.run(
        [str(submit), "--master", spark_master, "--conf", "spark.executor.memory=1g",
         str(ROOT / "scripts" / "jetspark_demo.py"), *args, "--report-dir", str(tmp_path / "cluster")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert cluster.returncode == 0, cluster.stdout[-4000:] + cluster.stderr[-4000:]
    assert re.findall(r"^spark: (.*)$", cluster.stdout, re.M) == [spark_master], cluster.stdout[-3000:]
    # the executors' read tasks used the native reader, on confluent-kafka's librdkafka
    logs = _executor_logs(submitted)
    assert f"jetkafka reader: native (librdkafka {confluent_kafka.libversion()[0]})" in logs, logs[-3000:]
    assert "jetkafka reader: confluent-kafka" not in logs

    ours, theirs = _windows(pg_dsn, local.stdout), _windows(pg_dsn, cluster.stdout)
    assert len(ours) > 20 and len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        assert a[:4] == b[:4]
        for x, y in zip(a[4:], b[4:], strict=True):
            assert (x is None and y is None) or math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
