"""One call to a Kafka stream with jetkafka's watermark applied: :func:`read_kafka_stream`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from jetspark.datasources.stream import read_stream

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.connect.session import SparkSession as ConnectSession


def read_kafka_stream(spark: SparkSession | ConnectSession, options: Mapping[str, str] | None = None, /, *,
                      metrics_name: str | None = "jetkafka", **more: str) -> DataFrame:
    """``spark.readStream.format("jetkafka")`` with the options, observed, watermark applied.

    Parameters
    ----------
    spark : SparkSession
        A classic or Spark Connect session (over Connect the server must have jetspark).
    options : Mapping[str, str], optional
        Options of the ``jetkafka`` format (``kafka.bootstrap.servers``, ``subscribe``,
        ``watermark.lag``, …); values are passed as strings.
    metrics_name : str or None, default "jetkafka"
        Name of the observed metrics of each micro-batch (``records``, ``lateRecords``,
        ``watermark``); None: no observation.
    **more : str
        More options, as keyword arguments; they win over ``options``
        (``read_kafka_stream(spark, {"kafka.bootstrap.servers": bs}, subscribe="orders")``).

    Returns
    -------
    DataFrame
        The streaming DataFrame after ``withWatermark("watermark", "0 seconds")``, so
        Spark's event-time watermark is the source's coalesced watermark; heartbeat rows stay
        in it (``window_aggregate`` drops them). See
        ``jetspark.datasources.stream.read_stream``; the per-partition watermarks are in
        the end offset's ``partitions[topic][partition]``.

    Raises
    ------
    jetspark.errors.SparkConnectError
        Over Spark Connect, when the server cannot run the source. An invalid option fails
        the query when Spark plans it, wrapped by Spark: find it with
        [`jetspark.errors.jetspark_error_of`][jetspark.errors.jetspark_error_of].
    """
    from pyspark_jetkafka import DefaultSource  # source AND sink: the name must keep its writer

    return read_stream(spark, DefaultSource, {**(options or {}), **more}, metrics_name)
