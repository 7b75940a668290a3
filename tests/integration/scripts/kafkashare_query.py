"""Query script for jetkafkashare kill tests: share group -> jetjdbc (two-phase, exactly once).

    python kafkashare_query.py CONFIG_JSON

CONFIG_JSON: {"bootstrap", "topic", "group", "checkpoint", "pgDsn", "schema", "table", "sinkId",
"total", "absorb", "alsoCount": [tables of the schema another consumer of the group writes]}.
The rows written are ``id`` (the record's value), ``partition``, ``offset``, ``deliveryCount``.

Runs until the tables (the sink's and ``alsoCount``'s) hold ``total`` rows and at least
``absorb`` redelivered records were recognised and ACCEPTed without being emitted (counted over
this run's batches), or until they hold more than ``total`` (a duplicate: the test shows it);
then stops the query, prints ``ABSORBED n`` and exits 0. A fault point may SIGKILL it first.
"""

from __future__ import annotations

import json
import os
import sys
import time

import psycopg
from psycopg import sql
from pyspark.sql import functions as F

from jetspark.datasources.kafkashare.acquired import count
from jetspark.devtools.spark import local_session

DEADLINE_S = float(os.environ.get("KAFKASHARE_QUERY_DEADLINE_S", "240"))  # a failure bound, never a pass


def rows(dsn: str, schema: str, tables: list[str]) -> int:
    """How many rows the tables hold together (a table not created yet holds none)."""
    with psycopg.connect(dsn) as conn:
        total = 0
        for table in tables:
            if conn.execute("SELECT to_regclass(%s)", (f'"{schema}"."{table}"',)).fetchone()[0] is not None:
                total += conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
                    sql.Identifier(schema, table))).fetchone()[0]
        return total


def main() -> None:
    c = json.loads(sys.argv[1])
    spark = local_session("jetkafkashare-kill-test")
    from jetspark.datasources.kafkashare.source import KafkaShareDataSource
    from jetspark.sinks.jdbc.writer import JdbcDataSource

    spark.dataSource.register(KafkaShareDataSource)
    spark.dataSource.register(JdbcDataSource)
    stream = (spark.readStream.format("jetkafkashare").option("kafka.bootstrap.servers", c["bootstrap"])
              .option("kafka.group.id", c["group"]).option("subscribe", c["topic"])
              .option("maxOffsetsPerTrigger", "10").load()
              .select(F.col("value").cast("string").alias("id"), "partition", "offset", "deliveryCount"))
    query = (stream.writeStream.format("jetjdbc").option("url", c["pgDsn"])
             .option("table", f'"{c["schema"]}".{c["table"]}').option("guarantee", "exactly-once")
             .option("createTable", "true").option("sinkId", c["sinkId"])
             .option("checkpointLocation", c["checkpoint"]).start())
    tables = [c["table"], *c.get("alsoCount", [])]
    absorbed: dict[int, int] = {}
    end = time.monotonic() + DEADLINE_S
    while True:
        query.processAllAvailable()
        for progress in query.recentProgress:
            offset = progress["sources"][0]["endOffset"]
            offset = json.loads(offset) if isinstance(offset, str) else offset
            if offset:
                absorbed[int(offset["seq"])] = count(offset.get("absorbed", {}))
        written = rows(c["pgDsn"], c["schema"], tables)
        if written > c["total"] or (written == c["total"] and sum(absorbed.values()) >= c["absorb"]):
            break
        if time.monotonic() > end:
            print("ABSORBED", sum(absorbed.values()), "of", c["absorb"], "ROWS", written, "of", c["total"],
                  flush=True)
            sys.exit(3)
    query.stop()
    print("ABSORBED", sum(absorbed.values()), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
