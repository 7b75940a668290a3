"""A deterministic, replayable streaming source for sink kill tests: row ids by offset range.

Offsets are row numbers; each trigger admits ``step`` more rows of ``total``; every batch
is split into two input partitions. A replayed batch yields exactly the same rows.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

SCHEMA = "id bigint, name string, amount double"
BAD_TEXT, BAD_AMOUNT = 3, 7  # poisoned(): ids ending in 3 get a NUL in their name, in 7 a negative amount


def ids_schema():
    """SCHEMA as a StructType."""
    from pyspark.sql import types as T

    return T.StructType([T.StructField("id", T.LongType()), T.StructField("name", T.StringType()),
                         T.StructField("amount", T.DoubleType())])


def poisoned(df):
    """The ids rows with two kinds of rows PostgreSQL refuses: a NUL in the name (no text column
    can hold it) for ids ending in 3, and for those ending in 7 a negative amount (refused by
    ``CHECK (amount >= 0)``)."""
    from pyspark.sql import functions as F

    digit, name, amount = F.col("id") % 10, F.col("name"), F.col("amount")
    return df.select("id",
                     F.when(digit == BAD_TEXT, F.concat(name, F.lit("\x00"))).otherwise(name).alias("name"),
                     F.when(digit == BAD_AMOUNT, -amount - 1).otherwise(amount).alias("amount"))


class _IdsReader(DataSourceStreamReader):
    def __init__(self, total: int, step: int) -> None:
        self.total, self.step = total, step

    def initialOffset(self) -> dict:
        return {"next": 0}

    def latestOffset(self, start: dict, limit) -> dict:
        return {"next": min(start["next"] + self.step, self.total)}

    def partitions(self, start: dict, end: dict):
        lo, hi = start["next"], end["next"]
        mid = (lo + hi) // 2
        return [InputPartition((lo, mid)), InputPartition((mid, hi))]

    def read(self, partition: InputPartition):
        lo, hi = partition.value
        ids = pa.array(range(lo, hi), pa.int64())
        names = pa.array([f"row-{i}" for i in range(lo, hi)], pa.string())
        yield pa.RecordBatch.from_arrays([ids, names, pc.multiply(ids, 0.5)], ["id", "name", "amount"])

    def commit(self, end: dict) -> None:
        pass


class IdsSource(DataSource):
    """``format("jetspark_test_ids")`` with options ``total`` and ``step``."""

    @classmethod
    def name(cls) -> str:
        return "jetspark_test_ids"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema):
        return _IdsReader(int(self.options.get("total", "100")), int(self.options.get("step", "25")))
