"""Kill-test query: windows with early results from parquet files into ``jetjdbc`` upserts.

    python early_results_jdbc_query.py DSN TABLE CHECKPOINT INPUT_DIR

One file per micro-batch (columns k, ts, x, y, watermark, heartbeat); 10-second tumbling
windows with a provisional row every micro-batch (``early_results=0``), upserted by
(k, window_start) with ``guarantee=exactly-once``; a stored final row is not updated again
(``finalColumn``).
"""

from __future__ import annotations

import sys

from query_end import run_to_end  # the script's folder is on sys.path

from jetspark.devtools.spark import local_session
from jetspark.sinks.jdbc.writer import JdbcDataSource
from jetspark.windowing import ops, tumbling, window_aggregate


def main() -> None:
    dsn, table, checkpoint, folder = sys.argv[1:5]
    spark = local_session("early-results-kill")
    spark.dataSource.register(JdbcDataSource)
    schema = spark.read.parquet(folder).schema
    events = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(folder)
              .withWatermark("watermark", "0 seconds"))
    windows = window_aggregate(events, key="k", time="ts", window=tumbling("10 seconds"),
                               aggs={"n": ops.count(), "s": ops.sum_("x")}, buckets=2, early_results=0)
    query = (windows.writeStream.format("jetjdbc").option("url", dsn).option("table", table)
             .option("guarantee", "exactly-once").option("commit", "upsert")
             .option("keys", "k,window_start").option("finalColumn", "final").option("createTable", "true")
             .option("checkpointLocation", checkpoint).start())
    run_to_end(spark, query)


if __name__ == "__main__":
    main()
