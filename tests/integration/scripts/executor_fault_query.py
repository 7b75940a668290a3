"""jetkafka → jetjdbc (``commit=two-phase``) for the executor-fault tests, run to its end under
AvailableNow.

    python executor_fault_query.py BOOTSTRAP TOPIC CHECKPOINT MAX_OFFSETS MASTER DSN TABLE

Key and value as read, as text columns ``k`` and ``v`` of TABLE (created by the sink); no
shuffle and no state, so a micro-batch is one stage whose tasks read a Kafka partition and
write it into PostgreSQL: the cheapest exactly-once query on a cluster. The topic is read from
the earliest offsets, MAX_OFFSETS per micro-batch; the script prints ``DONE`` at a clean end,
and the query's error (and exits 1) otherwise.
"""

from __future__ import annotations

import sys

from pyspark_jetkafka import DefaultSource  # the one jetkafka format: source and sink

from jetspark.devtools.spark import local_session
from jetspark.sinks.jdbc.writer import JdbcDataSource


def main() -> None:
    bootstrap, topic, checkpoint, max_offsets, master, dsn, table = sys.argv[1:8]
    spark = local_session("executor-fault-jdbc", master=master)
    spark.dataSource.register(DefaultSource)
    spark.dataSource.register(JdbcDataSource)
    query = (
        spark.readStream.format("jetkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max_offsets)
        .load()  # a plain read: Spark's columns, no heartbeat rows
        .selectExpr("CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v")
        .writeStream.format("jetjdbc")
        .option("url", dsn)
        .option("table", table)
        .option("guarantee", "exactly-once")
        .option("commit", "two-phase")
        .option("createTable", "true")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    finally:
        for p in query.recentProgress:  # for the log: when each batch ran, and how long
            print(
                f"BATCH {p.batchId} at {p.timestamp}: {p.durationMs.get('triggerExecution')} ms, "
                f"{p.numInputRows} rows",
                flush=True,
            )
    print("DONE", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
