"""Query script: a Python streaming source → parquet, on the master given as argv[1].

Usage: cluster_counting.py MASTER OUTPUT_DIR CHECKPOINT_DIR
"""

from __future__ import annotations

import itertools
import sys

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from jetspark.devtools.spark import local_session

TOTAL = 20_000


class _Range(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end


class Reader(DataSourceStreamReader):
    def initialOffset(self) -> dict:
        return {"next": 0}

    def latestOffset(self) -> dict:
        return {"next": TOTAL}

    def partitions(self, start: dict, end: dict):
        step = (end["next"] - start["next"]) // 4
        bounds = [start["next"] + i * step for i in range(4)] + [end["next"]]
        return [_Range(a, b) for a, b in itertools.pairwise(bounds)]

    def read(self, partition: _Range):
        import os

        ids = pa.array(range(partition.start, partition.end), pa.int64())
        pid = pa.array([os.getpid()] * len(ids), pa.int64())
        yield pa.RecordBatch.from_arrays([ids, pa.compute.multiply(ids, ids), pid],
                                         ["id", "square", "worker_pid"])


class Source(DataSource):
    @classmethod
    def name(cls) -> str:
        return "cluster_counting"

    def schema(self) -> str:
        return "id bigint, square bigint, worker_pid bigint"

    def streamReader(self, schema):
        return Reader()


def main(master: str, output: str, checkpoint: str) -> None:
    spark = local_session("cluster-counting", master=master,
                          conf={"spark.executor.memory": "1g", "spark.executor.cores": "1"})
    spark.dataSource.register(Source)
    query = (spark.readStream.format("cluster_counting").load()
             .writeStream.format("parquet").option("path", output)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()
    print(f"EXECUTORS {executors}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
