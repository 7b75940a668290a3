"""One call to a jetspark source's stream with its watermark applied: the shared part of
:func:`jetspark.datasources.read_kafka_stream` and :func:`jetspark.datasources.read_rabbitmq_stream`."""

from __future__ import annotations

from collections.abc import Mapping

from jetspark.columns import HEARTBEAT, LATE, WATERMARK
from jetspark.connect import is_connect, resolved_on_server
from jetspark.datasources.watermark_options import HEARTBEATS
from jetspark.warm_workers import warm_python_workers
from jetspark.worker_python import warn_if_workers_lack_jetspark


def ensure_registered(spark, source: type) -> None:
    """Register a format unless the (classic) session knows it already: PySpark's
    auto-registration (the ``pyspark_jet*`` modules) usually found it, and registering again
    makes Spark warn that the data source "replaced a statically registered data source" on
    every query. Over Spark Connect: :func:`jetspark.connect.resolved_on_server`."""
    if spark._jsparkSession.sessionState().dataSourceManager().dataSourceExists(source.name()):
        return
    spark.dataSource.register(source)


def read_stream(spark, source: type, options: Mapping[str, object], metrics_name: str | None):
    """``spark.readStream.format(source.name())`` with the options, observed, watermark applied.

    Returns the stream after ``withWatermark("watermark", "0 seconds")``, so Spark's event-time
    watermark is the source's coalesced watermark W. It turns ``watermark.heartbeats`` on
    (unless the options say otherwise): heartbeat rows (``heartbeat`` true: W moved without
    data, or stubs of late records with ``watermark.lateRecords=drop``) stay in the stream, because Spark
    must see their watermark; drop them downstream with ``where(~col("heartbeat"))``
    (jetspark's windowing does it for you). Warns once when Spark's Python workers would run
    an interpreter without jetspark (:mod:`jetspark.worker_python`) and starts Python workers
    that import the format beside the build (:mod:`jetspark.warm_workers`); over Spark Connect,
    raises :class:`jetspark.errors.SparkConnectError` when the server cannot run the source
    (:mod:`jetspark.connect`).

    Unless ``metrics_name`` is None, each batch's observed metrics ``metrics_name``
    (:func:`jetspark.listener.observed_metrics`, or ``query.lastProgress["observedMetrics"]``
    in a classic session) hold ``records`` (data rows), ``lateRecords`` (late records, dropped or
    kept) and ``watermark`` (the batch's W). Per-partition watermarks and idle flags are in
    the source's end offset: ``json.loads(query.lastProgress["sources"][0]["endOffset"])
    ["partitions"][stream][partition]`` → ``{"maxTs", "wm", "idle", "progressMs"}``.
    """
    from pyspark.sql import functions as F

    reader = spark.readStream.format(source.name())
    if not any(str(key).lower() == HEARTBEATS.lower() for key in options):
        options = {**options, HEARTBEATS: "true"}  # event-time semantics: this call asks for them
    for key, value in options.items():
        reader = reader.option(key, str(value))
    if is_connect(spark):  # the server's workers run the source: its jetspark, its registration
        df = resolved_on_server(spark, source, reader.load)
    else:
        warn_if_workers_lack_jetspark(spark)
        ensure_registered(spark, source)
        warm_python_workers(spark, (source.__module__,))  # the format's reader (and writer)
        df = reader.load()
    if metrics_name:
        df = df.observe(
            metrics_name,
            F.count_if(~F.col(HEARTBEAT)).alias("records"),
            F.count_if(F.col(LATE)).alias("lateRecords"),
            F.max(WATERMARK).alias("watermark"),
        )
    return df.withWatermark(WATERMARK, "0 seconds")
