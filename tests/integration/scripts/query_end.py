"""Shared end of the kill-test query scripts: run the query to the end, then say DONE."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery


def run_to_end(spark: SparkSession, query: StreamingQuery) -> None:
    """Process everything available, stop the query, print ``DONE`` (the harness's sign of a
    clean end) and stop Spark."""
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    print("DONE", flush=True)
    spark.stop()
