"""A local SparkSession configured the way jetspark's tests, demo and benchmarks run."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def local_session(
    app_name: str = "jetspark",
    *,
    master: str | None = "local[2]",
    shuffle_partitions: int = 4,
    conf: Mapping[str, str] | None = None,
):
    """Get or create a SparkSession: UI off, few shuffle partitions, RocksDB state store.

    Python workers run the interpreter that runs this code (``PYSPARK_PYTHON``), so the
    data sources and UDFs see the same installed packages. ``master=None`` leaves the
    master to ``spark-submit`` (or Spark's default).
    """
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
