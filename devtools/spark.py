"""A local SparkSession configured the way jetspark's tests, demo and benchmarks run."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from jetspark.errors import SparkConnectError

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

ARROW_UNCHECKED_JAVA_OPTIONS = (
    "-Darrow.enable_unsafe_memory_access=true -Darrow.enable_null_check_for_get=false"
)
"""Java options that turn off Arrow's bounds and null checks on every read of an Arrow vector in
the JVM: the JVM's share of a Python source's batches (docs/how-to/deploy.md, "Arrow's checks")."""


def arrow_unchecked_conf() -> dict[str, str]:
    """The session settings that start the driver and executors with
    :data:`ARROW_UNCHECKED_JAVA_OPTIONS` (a local master's executor is the driver)."""
    return {
        "spark.driver.extraJavaOptions": ARROW_UNCHECKED_JAVA_OPTIONS,
        "spark.executor.extraJavaOptions": ARROW_UNCHECKED_JAVA_OPTIONS,
    }


def refuse_connect_master(master: str | None) -> None:
    """Raise :class:`SparkConnectError` when ``master`` is a Spark Connect URL (``sc://…``)."""
    if master is not None and master.startswith("sc://"):
        raise SparkConnectError(
            f"master {master!r} is a Spark Connect server, but local_session starts a Spark of its "
            "own (the demo's, the tests' and the benchmarks' local session) and needs its JVM in this "
            "process; reach a Connect server with SparkSession.builder.remote(url) instead "
            "(docs/how-to/spark-connect.md)"
        )


def local_session(
    app_name: str = "jetspark",
    *,
    master: str | None = "local[2]",
    shuffle_partitions: int = 4,
    conf: Mapping[str, str] | None = None,
):
    """Get or create a SparkSession: UI off, few shuffle partitions, RocksDB state store with
    changelog checkpointing (the settings for live queries, docs/how-to/live-latency.md).

    Python workers run the interpreter that runs this code (``PYSPARK_PYTHON``), so the
    data sources and UDFs see the same installed packages. ``master=None`` leaves the
    master to ``spark-submit`` (or Spark's default). It is a classic session that starts its
    own Spark: a Spark Connect URL (``sc://…``) is refused with a :class:`SparkConnectError`.
    """
    refuse_connect_master(master)
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder if master is None else SparkSession.builder.master(master)
    builder = (
        builder.appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(shuffle_partitions))
        .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.python.worker.reuse", "true")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


@contextmanager
def output_to_log(path: str | Path) -> Iterator[Path]:
    """Send this process's stderr (file descriptor 2) and Python's warnings and loggers to ``path``.

    A local Spark driver JVM started inside inherits the descriptor, so its log4j console
    output, the JVM's own notices and what Python workers write on stderr (the state API's
    start-up lines, jetkafka's reader announcement) all land in the file, and stdout keeps
    only what the program prints. Under ``spark-submit`` the JVM is the parent process and
    keeps its own stderr. The descriptor and the logging set-up are restored on exit; if the
    block raises, the file is named on the restored stderr before the error propagates.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
    root = logging.getLogger()
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    logging.captureWarnings(True)
    try:
        yield path
    except BaseException:
        sys.stderr.flush()
        os.write(saved, f"(Spark's log: {path})\n".encode())
        raise
    finally:
        logging.captureWarnings(False)
        root.removeHandler(handler)
        handler.close()
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
