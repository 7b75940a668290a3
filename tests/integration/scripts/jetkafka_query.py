"""A jetkafka query for the kill tests: AvailableNow, one JSON file per micro-batch.

usage: jetkafka_query.py BOOTSTRAP TOPIC CHECKPOINT OUT_DIR MAX_OFFSETS_PER_TRIGGER

Each batch's rows (partition, offset, key, watermark) go to OUT_DIR/batch-<id>.json,
written atomically and overwritten when Spark replays the batch, so the files show
exactly what each committed batch contained.
"""

from __future__ import annotations

import json
import os
import sys

from pyspark_jetkafka import DefaultSource  # the one jetkafka format: source and sink

from jetspark import faults
from jetspark.devtools.spark import local_session


def main() -> None:
    bootstrap, topic, checkpoint, out_dir, max_offsets = sys.argv[1:6]
    spark = local_session("jetkafka-kill-test")
    spark.dataSource.register(DefaultSource)
    df = (spark.readStream.format("jetkafka")
          .option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", max_offsets)
          .option("maxRecordsPerChunk", "5").option("watermark.lag", "1 hour").load())

    def write_batch(batch, batch_id: int) -> None:
        rows = [{"partition": r.partition, "offset": r.offset, "key": r.key.decode(),
                 "watermark": None if r.watermark is None else r.watermark.isoformat()}
                for r in batch.where("NOT heartbeat").collect()]
        faults.point("jetkafka_test.in_batch")  # the batch is read, not yet written or committed
        path = os.path.join(out_dir, f"batch-{batch_id}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(rows, f)
        os.replace(path + ".tmp", path)

    query = (df.writeStream.foreachBatch(write_batch).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
