"""A live exactly-once query for the service-fault tests, run to its end under AvailableNow.

    python service_fault_query.py window-jdbc BOOTSTRAP TOPIC CHECKPOINT MAX_OFFSETS MASTER DSN TABLE
    python service_fault_query.py kafka BOOTSTRAP TOPIC CHECKPOINT MAX_OFFSETS MASTER OUT_TOPIC

``window-jdbc``: ``jetkafka`` → 10-second tumbling windows per key (``window_aggregate``, count)
→ ``jetjdbc`` (``commit=two-phase``). ``kafka``: ``jetkafka`` → ``jetkafka`` (``commit=task``),
key and value as read. The topic is read from the earliest offsets, MAX_OFFSETS per micro-batch;
the script prints ``DONE`` at a clean end, and the query's error (and exits 1) otherwise.
``SERVICE_FAULT_KAFKA_OPTIONS`` (JSON, optional) adds options to the jetkafka source, and its
``kafka.*`` ones to the jetkafka sink.
"""

from __future__ import annotations

import json
import os
import sys

from pyspark_jetkafka import DefaultSource  # the one jetkafka format: source and sink

from jetspark.devtools.spark import local_session


def main() -> None:
    kind, bootstrap, topic, checkpoint, max_offsets, master, *target = sys.argv[1:]
    spark = local_session(f"service-fault-{kind}", master=master)
    spark.dataSource.register(DefaultSource)
    kafka_options = json.loads(os.environ.get("SERVICE_FAULT_KAFKA_OPTIONS", "{}"))
    source = (spark.readStream.format("jetkafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", max_offsets).option("watermark.lag", "0 seconds")
              .options(**kafka_options).load())
    if kind == "window-jdbc":
        from jetspark.sinks.jdbc.writer import JdbcDataSource
        from jetspark.windowing import ops, tumbling, window_aggregate

        spark.dataSource.register(JdbcDataSource)
        dsn, table = target
        events = (source.selectExpr("CAST(key AS STRING) AS k", "timestamp", "heartbeat", "watermark")
                  .withWatermark("watermark", "0 seconds"))
        windows = window_aggregate(events, key="k", time="timestamp", window=tumbling("10 seconds"),
                                   aggs={"n": ops.count()}, buckets=2)
        writer = (windows.writeStream.format("jetjdbc").option("url", dsn).option("table", table)
                  .option("guarantee", "exactly-once").option("commit", "two-phase")
                  .option("createTable", "true"))
    else:
        (out_topic,) = target
        writer = (source.where("NOT heartbeat").select("key", "value").writeStream.format("jetkafka")
                  .option("kafka.bootstrap.servers", bootstrap).option("topic", out_topic)
                  .option("guarantee", "exactly-once").option("commit", "task")
                  .options(**{k: v for k, v in kafka_options.items() if k.startswith("kafka.")}))
    query = writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    try:
        query.awaitTermination()
    finally:
        for p in query.recentProgress:  # for the log: when each batch ran, and how long
            print(f"BATCH {p.batchId} at {p.timestamp}: {p.durationMs.get('triggerExecution')} ms, "
                  f"{p.numInputRows} rows", flush=True)
    print("DONE", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
