"""One call to a queue's stream with jetrabbitmq's watermark applied: :func:`read_rabbitmq_stream`."""

from __future__ import annotations

from collections.abc import Mapping

from jetspark.datasources.stream import read_stream


def read_rabbitmq_stream(spark, options: Mapping[str, str] | None = None, /, *,
                         metrics_name: str | None = "jetrabbitmq", **more: str):
    """``spark.readStream.format("jetrabbitmq")`` with the options, observed, watermark applied.

    Options are those of the ``jetrabbitmq`` format (``url``, ``queue``, ``walLocation``,
    ``watermark.lag``, …), as a mapping and/or keyword arguments. What it returns and
    observes: :func:`jetspark.datasources.stream.read_stream`, as for
    :func:`jetspark.datasources.read_kafka_stream`; the queue's watermark is in the end
    offset's ``partitions[queue]["0"]``.
    """
    from jetspark.datasources.rabbitmq.source import RabbitMQDataSource

    return read_stream(spark, RabbitMQDataSource, {**(options or {}), **more}, metrics_name)
