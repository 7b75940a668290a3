"""Query script for jetrabbitmq kill tests: queue -> foreachBatch -> PostgreSQL (idempotent).

Usage: rabbitmq_query.py AMQP_URL QUEUE WAL_DIR CHECKPOINT PG_DSN PG_SCHEMA MAX_PER_TRIGGER [PREFETCH]
Runs with Trigger.AvailableNow and exits 0 when done; a fault point may SIGKILL it first.
"""

from __future__ import annotations

import json
import sys

from jetspark.devtools.spark import local_session
from tests.integration.scripts.rabbitmq_common import pg_batch_writer, pg_sink_table


def main() -> None:
    url, queue, wal, checkpoint, dsn, schema, max_per_trigger = sys.argv[1:8]
    prefetch = dict(enumerate(sys.argv[8:])).get(0)
    spark = local_session("jetrabbitmq-kill-test")
    from jetspark.datasources.rabbitmq.source import RabbitMQDataSource

    spark.dataSource.register(RabbitMQDataSource)
    table = pg_sink_table(dsn, schema)
    stream = (
        spark.readStream.format("jetrabbitmq")
        .option("url", url).option("queue", queue).option("walLocation", wal)
        .option("maxMessagesPerTrigger", max_per_trigger)
        .options(**({"prefetch": prefetch} if prefetch else {}))
        .load()
        .where("NOT heartbeat")  # stubs of late messages
    )
    query = (
        stream.writeStream.foreachBatch(pg_batch_writer(dsn, table))
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    end = query.lastProgress["sources"][0]["endOffset"] if query.lastProgress else None
    print("RESULT", end if isinstance(end, str) else json.dumps(end), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
