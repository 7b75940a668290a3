"""One call to a Kafka stream with jetkafka's watermark applied: :func:`read_kafka_stream`."""

from __future__ import annotations

from collections.abc import Mapping

from jetspark.datasources.stream import read_stream


def read_kafka_stream(spark, options: Mapping[str, str] | None = None, /, *,
                      metrics_name: str | None = "jetkafka", **more: str):
    """``spark.readStream.format("jetkafka")`` with the options, observed, watermark applied.

    Options are those of the ``jetkafka`` format (``kafka.bootstrap.servers``,
    ``subscribe``, ``watermark.lag``, …), as a mapping and/or keyword arguments
    (``read_kafka_stream(spark, {"kafka.bootstrap.servers": bs}, subscribe="orders")``).
    What it returns and observes: :func:`jetspark.datasources.stream.read_stream`; the
    per-partition watermarks are in the end offset's ``partitions[topic][partition]``.
    """
    from pyspark_jetkafka import DefaultSource  # source AND sink: the name must keep its writer

    return read_stream(spark, DefaultSource, {**(options or {}), **more}, metrics_name)
