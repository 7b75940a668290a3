"""Kill-test query: ids from a deterministic source into the Kafka sink until all are written.

    python sink_kafka_query.py BOOTSTRAP TOPIC CHECKPOINT MODE TOTAL STEP [DEAD_LETTER_TOPIC]

With DEAD_LETTER_TOPIC, ids ending in 3 or 7 name partition 9, which TOPIC lacks: Kafka refuses
them, and they are dead letters on DEAD_LETTER_TOPIC, in the tasks' transactions.

The sink is reached through a small test DataSource (``jetkafka_sink_test``) that delegates
to ``jetspark.sinks.kafka.writer``, as the ``jetkafka`` source's DataSource does. Python
workers run without the PySpark daemon, so a fault point kills the whole driver.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
sys.path.insert(0, _HERE)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_HERE, os.environ.get("PYTHONPATH")]))

from query_end import run_to_end  # noqa: E402
from sink_ids_source import IdsSource  # noqa: E402
from sink_kafka_test_source import KafkaSinkTestSource  # noqa: E402

from jetspark.devtools.spark import local_session  # noqa: E402
from jetspark.sinks.guarantees import GIVES  # noqa: E402


def main() -> None:
    bootstrap, topic, checkpoint, commit, total, step = sys.argv[1:7]
    dead = sys.argv[7] if len(sys.argv) > 7 else None
    spark = local_session("sink-kafka-kill")
    spark.dataSource.register(IdsSource)
    spark.dataSource.register(KafkaSinkTestSource)
    stream = (spark.readStream.format("jetspark_test_ids").option("total", total).option("step", step).load()
              .selectExpr("CAST(id AS STRING) AS key", "name AS value",
                          f"CASE WHEN {dead is not None} AND id % 10 IN (3, 7) THEN 9 END AS partition"))
    writer = (stream.writeStream.format("jetkafka_sink_test").option("kafka.bootstrap.servers", bootstrap)
              .option("topic", topic).option("guarantee", GIVES[commit]).option("commit", commit)
              .option("checkpointLocation", checkpoint))
    if dead is not None:
        writer = writer.option("deadLetterTopic", dead)
    query = writer.start()
    run_to_end(spark, query)


if __name__ == "__main__":
    main()
