"""Query script for jetkafkashare kill tests: share group -> Parquet file sink (exactly once).

Usage: kafkashare_query.py BOOTSTRAP TOPIC GROUP CHECKPOINT OUT ABSORB
Runs until Spark has nothing more to process, at least ABSORB redelivered records were
recognised and ACCEPTed without being emitted (counted over this run's batches) and the last
batch awaits no more redelivery; then stops the query and exits 0. A fault point may SIGKILL it first.
"""

from __future__ import annotations

import json
import sys
import time

from jetspark.datasources.kafkashare.acquired import count
from jetspark.devtools.spark import local_session

DEADLINE_S = 240  # a failure bound, never a pass condition


def main() -> None:
    bootstrap, topic, group, checkpoint, out, absorb = sys.argv[1:7]
    spark = local_session("jetkafkashare-kill-test")
    from jetspark.datasources.kafkashare.source import KafkaShareDataSource

    spark.dataSource.register(KafkaShareDataSource)
    stream = (spark.readStream.format("jetkafkashare").option("kafka.bootstrap.servers", bootstrap)
              .option("kafka.group.id", group).option("subscribe", topic)
              .option("maxOffsetsPerTrigger", "10").load())
    query = (stream.writeStream.format("parquet").option("path", out)
             .option("checkpointLocation", checkpoint).start())
    absorbed: dict[int, int] = {}
    awaited: dict[int, int] = {0: 0}
    end = time.monotonic() + DEADLINE_S
    while True:
        query.processAllAvailable()
        for progress in query.recentProgress:
            offset = progress["sources"][0]["endOffset"]
            offset = json.loads(offset) if isinstance(offset, str) else offset
            if offset:
                absorbed[int(offset["seq"])] = count(offset.get("absorbed", {}))
                awaited[int(offset["seq"])] = count(offset.get("unconfirmed", {}))
        # done: the redeliveries expected came back, and the last batch awaits none
        if sum(absorbed.values()) >= int(absorb) and awaited[max(awaited)] == 0:
            break
        if time.monotonic() > end:
            print("ABSORBED", sum(absorbed.values()), "of", absorb, flush=True)
            sys.exit(3)
    query.stop()
    print("ABSORBED", sum(absorbed.values()), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
