"""A local Spark standalone cluster (one master, two workers) from the pyspark installation.

Started with ``spark-class`` on 127.0.0.1, so a query submitted with
``--master spark://…`` runs in separate executor JVMs and Python workers, as on a real
cluster. Not started by default: ``jetspark services up spark``.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path

from jetspark.devtools.services.process import ensure_port_free, free_port, spawn, stop, wait_ready
from jetspark.devtools.services.registry import ServiceRecord
from jetspark.errors import ServiceError

NAME = "spark"
WORKERS = 2
WORKER_CORES = 1
WORKER_MEMORY = "2g"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _env(data_dir: Path) -> dict[str, str]:
    return {
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(data_dir / "logs"),
        "SPARK_WORKER_DIR": str(data_dir / "work"),
        # Executors start Python workers with the interpreter that has jetspark installed.
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
    }


def _alive_workers(ui_port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=3) as resp:
        return int(json.load(resp)["aliveworkers"])


def start(data_dir: Path, ports: dict[str, int] | None = None) -> ServiceRecord:
    """Start the master and ``WORKERS`` workers; ready when all workers registered."""
    ports = ports or {"master": free_port(), "ui": free_port()}
    for port in ports.values():
        ensure_port_free(port, NAME)
    data_dir.mkdir(parents=True, exist_ok=True)
    spark_class = str(spark_home() / "bin" / "spark-class")
    env = _env(data_dir)
    master = spawn(
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
         "--port", str(ports["master"]), "--webui-port", str(ports["ui"])],
        log=data_dir / "master.log", env=env,
    )
    wait_ready(NAME, master, lambda: _alive_workers(ports["ui"]), timeout_s=60)
    url = f"spark://127.0.0.1:{ports['master']}"
    processes = [master]
    try:
        for i in range(WORKERS):
            processes.append(spawn(
                [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                 "--cores", str(WORKER_CORES), "--memory", WORKER_MEMORY, "--webui-port", "0",
                 "--work-dir", str(data_dir / f"work-{i}")],
                log=data_dir / f"worker-{i}.log", env=env,
            ))

        def all_registered() -> None:
            if _alive_workers(ports["ui"]) < WORKERS:
                raise ServiceError(f"{NAME}: not all {WORKERS} workers registered yet")

        wait_ready(NAME, master, all_registered, timeout_s=90)
    except ServiceError:
        for proc in reversed(processes):
            stop(proc)
        raise
    # Processes are stopped in tuple order: the workers before their master.
    return ServiceRecord(NAME, url, str(data_dir), dict(ports), tuple(reversed(processes)))
