"""Kill-test query: ids from a deterministic source into ``jetjdbc`` until all are written.

    python sink_jdbc_query.py DSN TABLE CHECKPOINT MODE TOTAL STEP [SPARK_MASTER [USE_DAEMON]]

With ``SINK_POISON=1`` in the environment the rows are ``poisoned`` (some refused by PostgreSQL).

Python workers run without the PySpark daemon by default, so a fault point hit in a task
or in the driver's commit worker kills the whole driver process group (a crashed driver).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
sys.path.insert(0, _HERE)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_HERE, os.environ.get("PYTHONPATH")]))

from query_end import run_to_end  # noqa: E402
from sink_ids_source import IdsSource, poisoned  # noqa: E402

from jetspark.devtools.spark import local_session  # noqa: E402
from jetspark.sinks.guarantees import GIVES  # noqa: E402
from jetspark.sinks.jdbc.writer import JdbcDataSource  # noqa: E402


def main() -> None:
    dsn, table, checkpoint, commit, total, step = sys.argv[1:7]
    master = sys.argv[7] if len(sys.argv) > 7 else "local[2]"
    spark = local_session("sink-jdbc-kill", master=master)
    spark.dataSource.register(IdsSource)
    spark.dataSource.register(JdbcDataSource)
    stream = spark.readStream.format("jetspark_test_ids").option("total", total).option("step", step).load()
    if os.environ.get("SINK_POISON"):
        stream = poisoned(stream)
    writer = (stream.writeStream.format("jetjdbc").option("url", dsn).option("table", table)
              .option("guarantee", GIVES[commit]).option("commit", commit)
              .option("checkpointLocation", checkpoint))
    if commit == "upsert":
        writer = writer.option("keys", "id")
    query = writer.start()
    run_to_end(spark, query)


if __name__ == "__main__":
    main()
