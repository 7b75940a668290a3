"""The same Python streaming source gives the same output on a standalone cluster."""

from __future__ import annotations

import re

import pyarrow.parquet as pq
import pytest

from tests.faults_harness import run_script

pytestmark = pytest.mark.integration

SCRIPT = __file__.replace("test_spark_cluster.py", "scripts/cluster_counting.py")


def _run(master: str, tmp_path, name: str):
    out = tmp_path / name
    run = run_script(SCRIPT, master, str(out / "data"), str(out / "checkpoint"),
                     state_dir=tmp_path).check_ok()
    table = pq.read_table(out / "data").sort_by("id")
    return run, table


@pytest.mark.timeout(900)  # a cluster start and two query scripts (300 s each)
def test_cluster_output_equals_local_output(spark_master, tmp_path):
    _local_run, local_rows = _run("local[2]", tmp_path, "local")
    cluster_run, cluster_rows = _run(spark_master, tmp_path, "cluster")
    assert cluster_rows.select(["id", "square"]).equals(local_rows.select(["id", "square"]))
    assert cluster_rows.num_rows == 20_000
    # Really distributed: two executors (plus the driver) and Python workers in them.
    assert re.findall(r"^EXECUTORS (\d+)$", cluster_run.output, re.M) == ["3"], cluster_run.output[-3000:]
