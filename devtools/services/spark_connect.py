"""A local Spark Connect server from the pyspark installation, for tests and trials.

PySpark's own server (``org.apache.spark.sql.connect.service.SparkConnectServer``, what
``sbin/start-connect-server.sh`` runs) started with ``spark-submit`` on 127.0.0.1, in a
JVM of its own: clients reach it as ``sc://localhost:<port>/;token=…`` and share nothing with it
but the network, as with a remote server. Its Python workers run this interpreter
(``PYSPARK_PYTHON`` in the server's environment), so jetspark's formats and windows are
installed on the server (docs/how-to/spark-connect.md).

A Connect server runs any code its clients send, so this one binds the loopback interface
only and asks every client for a token it makes at start (``spark.connect.authenticate.token``,
given in the server's environment as ``SPARK_CONNECT_AUTHENTICATE_TOKEN``, not on its command
line): the endpoint is ``sc://localhost:<port>/;token=<token>``. PySpark's client sends the
token over plaintext gRPC only to ``localhost`` (local credentials); to any other host it
needs TLS (``use_ssl=true``), which the server does not do itself: a TLS proxy in front.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Mapping
from pathlib import Path

from jetspark.devtools.services.process import ensure_port_free, free_port, port_open, spawn, wait_ready
from jetspark.devtools.services.registry import ServiceRecord
from jetspark.devtools.services.spark_cluster import spark_home
from jetspark.devtools.spark import ROCKSDB_PROVIDER
from jetspark.errors import ServiceError

NAME = "spark-connect"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"

# The server's side of what jetspark's queries need: RocksDB state for the windows, UTC.
DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
    "spark.sql.session.timeZone": "UTC",
    "spark.python.worker.reuse": "true",
    "spark.driver.memory": "1g",
}


def start(
    data_dir: Path,
    ports: dict[str, int] | None = None,
    *,
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
    token: str | None = None,
) -> ServiceRecord:
    """Start the server; ready when its gRPC port accepts connections. Endpoint
    ``sc://localhost:<port>/;token=<token>`` (``token``: a new random one by default)."""
    token = token or secrets.token_urlsafe(24)
    ports = ports or {"grpc": free_port()}
    ensure_port_free(ports["grpc"], NAME)
    data_dir.mkdir(parents=True, exist_ok=True)
    settings = {
        **DEFAULT_CONF,
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(ports["grpc"]),
        "spark.sql.warehouse.dir": str(data_dir / "warehouse"),
        **(conf or {}),
    }
    argv = [str(spark_home() / "bin" / "spark-submit"), "--class", SERVER_CLASS,
            "--name", "jetspark Spark Connect server", "--master", master]
    for key, value in settings.items():
        argv += ["--conf", f"{key}={value}"]
    # The environment variable, not spark.pyspark.python: PySpark 4.3's Connect planner runs the
    # Python functions of Connect clients (the windows' stages) with $PYSPARK_PYTHON only.
    env = {"SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
           "SPARK_CONNECT_AUTHENTICATE_TOKEN": token}
    server = spawn(argv, log=data_dir / "server.log", env=env, cwd=data_dir)

    def listening() -> None:
        if not port_open(ports["grpc"]):
            raise ServiceError(f"{NAME}: port {ports['grpc']} not open yet")

    wait_ready(NAME, server, listening, timeout_s=180)
    endpoint = f"sc://localhost:{ports['grpc']}/;token={token}"
    return ServiceRecord(NAME, endpoint, str(data_dir), dict(ports), (server,))
