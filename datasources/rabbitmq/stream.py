"""One call to a queue's stream with jetrabbitmq's watermark applied: :func:`read_rabbitmq_stream`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from jetspark.datasources.stream import read_stream

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.connect.session import SparkSession as ConnectSession


def read_rabbitmq_stream(spark: SparkSession | ConnectSession, options: Mapping[str, str] | None = None, /, *,
                         metrics_name: str | None = "jetrabbitmq", **more: str) -> DataFrame:
    """``spark.readStream.format("jetrabbitmq")`` with the options, observed, watermark applied.

    Parameters
    ----------
    spark : SparkSession
        A classic or Spark Connect session (over Connect the server must have jetspark).
    options : Mapping[str, str], optional
        Options of the ``jetrabbitmq`` format (``url``, ``queue``, ``walLocation``,
        ``watermark.lag``, …); values are passed as strings.
    metrics_name : str or None, default "jetrabbitmq"
        Name of the observed metrics of each micro-batch (``records``, ``lateRecords``,
        ``watermark``); None: no observation.
    **more : str
        More options, as keyword arguments; they win over ``options``.

    Returns
    -------
    DataFrame
        The streaming DataFrame after ``withWatermark("watermark", "0 seconds")``, as
        [`jetspark.datasources.read_kafka_stream`][jetspark.datasources.read_kafka_stream] (see
        ``jetspark.datasources.stream.read_stream``); the queue's watermark is in the end
        offset's ``partitions[queue]["0"]``.

    Raises
    ------
    jetspark.errors.SparkConnectError
        Over Spark Connect, when the server cannot run the source. An invalid option fails
        the query when Spark plans it, wrapped by Spark: find it with
        [`jetspark.errors.jetspark_error_of`][jetspark.errors.jetspark_error_of].
    """
    from jetspark.datasources.rabbitmq.source import RabbitMQDataSource

    return read_stream(spark, RabbitMQDataSource, {**(options or {}), **more}, metrics_name)
