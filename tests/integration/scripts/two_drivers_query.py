"""One exactly-once pipeline, for tests that start two drivers on one checkpoint.

    python two_drivers_query.py CONFIG_JSON

CONFIG_JSON: {"source": "rabbitmq" | "kafka", "sink": "jdbc" | "kafka", "checkpoint": …,
"perTrigger": n, "sinkId": …, and the endpoints: amqpUrl/queue/walLocation,
bootstrap/topic (source), pgDsn/table or bootstrap/outTopic (sink)}.

The query runs with ``Trigger.AvailableNow`` and prints ``DONE`` when it ends; an error
(e.g. another driver holds the checkpoint) ends the script with status 1 and the error.
Each output row holds the input's ID (the message ID, or the Kafka key).
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import functions as F

from jetspark.devtools.spark import local_session


def source(spark, c: dict):
    if c["source"] == "rabbitmq":
        df = (spark.readStream.format("jetrabbitmq").option("url", c["amqpUrl"]).option("queue", c["queue"])
              .option("walLocation", c["walLocation"]).option("maxMessagesPerTrigger", str(c["perTrigger"]))
              .option("prefetch", str(c["perTrigger"])).load())
        return df.where("NOT heartbeat").select(F.col("message_id").alias("id"))
    df = (spark.readStream.format("jetkafka").option("kafka.bootstrap.servers", c["bootstrap"])
          .option("subscribe", c["topic"]).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", str(c["perTrigger"])).load())
    return df.select(F.col("key").cast("string").alias("id"))  # a plain read: no heartbeat rows


def sink(df, c: dict):
    if c["sink"] == "jdbc":
        return (df.writeStream.format("jetjdbc").option("url", c["pgDsn"]).option("table", c["table"])
                .option("guarantee", "exactly-once").option("createTable", "true")
                .option("sinkId", c["sinkId"]))
    out = df.select(F.col("id").cast("binary").alias("key"), F.col("id").cast("binary").alias("value"))
    return (out.writeStream.format("jetkafka").option("kafka.bootstrap.servers", c["bootstrap"])
            .option("topic", c["outTopic"]).option("guarantee", "exactly-once").option("sinkId", c["sinkId"]))


def main() -> None:
    c = json.loads(sys.argv[1])
    spark = local_session("two-drivers")
    query = (sink(source(spark, c), c).option("checkpointLocation", c["checkpoint"])
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination()
    except Exception as e:  # the error is the result: print it whole for the test
        print("FAILED", e, flush=True)
        sys.exit(1)
    print("DONE", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
