"""Query script: the jet* formats resolve by name in a fresh session, with no register call.

Usage: formats_autoregistered.py KAFKA_BOOTSTRAP TOPIC PG_DSN TABLE
"""

from __future__ import annotations

import sys

import psycopg

from jetspark.devtools.spark import local_session


def main(bootstrap: str, topic: str, dsn: str, table: str) -> None:
    spark = local_session("formats-autoregistered")
    rows = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(5)], "key string, value string")
    (rows.write.format("jetkafka").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic).option("guarantee", "at-least-once").mode("append").save())
    back = (spark.read.format("jetkafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).load())
    print("KAFKA", sorted(r.value.decode() for r in back.select("value").collect()), flush=True)

    (spark.range(3).write.format("jetjdbc").option("url", dsn).option("table", table)
     .option("guarantee", "at-least-once").option("createTable", "true").mode("append").save())
    with psycopg.connect(dsn) as conn:
        print("JDBC", conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0], flush=True)

    try:
        (spark.readStream.format("jetrabbitmq").option("url", "amqp://127.0.0.1:1/")
         .option("queue", "q").load())
    except Exception as e:  # the error comes from our option parsing: the format resolved
        print("RABBITMQ", "walLocation" in str(e), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
