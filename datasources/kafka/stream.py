"""One call to a Kafka stream with jetkafka's watermark applied: :func:`read_kafka_stream`."""

from __future__ import annotations

from collections.abc import Mapping

from jetspark.datasources.kafka.source import FORMAT

WATERMARK_COLUMN = "watermark"
HEARTBEAT_COLUMN = "heartbeat"
LATE_COLUMN = "late"


def read_kafka_stream(spark, options: Mapping[str, str] | None = None, /, *,
                      metrics_name: str | None = "jetkafka", **more: str):
    """``spark.readStream.format("jetkafka")`` with the options, observed, watermark applied.

    Options are those of the ``jetkafka`` format (``kafka.bootstrap.servers``,
    ``subscribe``, ``watermark.lag``, …), as a mapping and/or keyword arguments
    (``read_kafka_stream(spark, {"kafka.bootstrap.servers": bs}, subscribe="orders")``).
    Returns the stream after ``withWatermark("watermark", "0 seconds")``, so Spark's
    event-time watermark is the source's coalesced per-partition watermark W.

    Heartbeat rows (``heartbeat`` true: W moved without data, or stubs of dropped late
    records) are still in the stream, because Spark must see their watermark; drop them
    downstream with ``where(~col("heartbeat"))`` (jetspark's windowing does it for you).

    Unless ``metrics_name`` is None, each batch's ``query.lastProgress["observedMetrics"]
    [metrics_name]`` holds ``records`` (data rows), ``lateRecords`` (late records, dropped
    or kept) and ``watermark`` (the batch's W). Per-partition watermarks and idle flags are
    in the source's end offset::

        end = json.loads(query.lastProgress["sources"][0]["endOffset"])
        end["partitions"][topic][str(partition)]   # {"maxTs", "wm", "idle", "progressMs"}
    """
    from pyspark.sql import functions as F
    from pyspark_jetkafka import DefaultSource  # source AND sink: the name must keep its writer

    spark.dataSource.register(DefaultSource)
    reader = spark.readStream.format(FORMAT)
    for key, value in {**(options or {}), **more}.items():
        reader = reader.option(key, str(value))
    df = reader.load()
    if metrics_name:
        df = df.observe(
            metrics_name,
            F.count_if(~F.col(HEARTBEAT_COLUMN)).alias("records"),
            F.count_if(F.col(LATE_COLUMN)).alias("lateRecords"),
            F.max(WATERMARK_COLUMN).alias("watermark"),
        )
    return df.withWatermark(WATERMARK_COLUMN, "0 seconds")
