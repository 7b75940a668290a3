"""A PySpark streaming query through a trivial Python data source: the wiring works."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

pytestmark = pytest.mark.integration

TOTAL = 1_000


class _Range(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end


class CountingReader(DataSourceStreamReader):
    """Offsets are row numbers; each trigger admits at most 300 rows of TOTAL."""

    def initialOffset(self) -> dict:
        return {"next": 0}

    def latestOffset(self) -> dict:  # old-style signature: Spark reads all available
        return {"next": TOTAL}

    def partitions(self, start: dict, end: dict):
        lo, hi = start["next"], end["next"]
        mid = (lo + hi) // 2
        return [_Range(lo, mid), _Range(mid, hi)]

    def read(self, partition: _Range):
        ids = pa.array(range(partition.start, partition.end), pa.int64())
        yield pa.RecordBatch.from_arrays([ids, pa.compute.multiply(ids, 2)], ["id", "twice"])

    def commit(self, end: dict) -> None:
        pass


class CountingSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "jetspark_smoke_counting"

    def schema(self) -> str:
        return "id bigint, twice bigint"

    def streamReader(self, schema):
        return CountingReader()


def test_streaming_query_through_python_data_source(spark, tmp_path):
    spark.dataSource.register(CountingSource)
    stream = spark.readStream.format("jetspark_smoke_counting").load()
    query = (
        stream.writeStream.format("memory").queryName("smoke_counting")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    rows = spark.sql("SELECT id, twice FROM smoke_counting").collect()
    assert sorted((r.id, r.twice) for r in rows) == [(i, 2 * i) for i in range(TOTAL)]
    assert query.exception() is None
