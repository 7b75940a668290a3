"""A streaming window whose local session leaves ``spark.sql.shuffle.partitions`` at Spark's
default runs its stateful stage in the default parallelism's tasks, and says so; a value the
user set is kept, and static windows change nothing (``jetspark.windowing.partitions``; over
Spark Connect: ``test_spark_connect.py``)."""

from __future__ import annotations

import json
import warnings

import pytest

from jetspark.windowing import StatefulPartitionsWarning, ops, tumbling, window_aggregate
from jetspark.windowing.partitions import SHUFFLE_PARTITIONS, set_by_user
from tests.integration.test_windowing_spark import make_batches, write_batch

pytestmark = pytest.mark.integration


def _stream(spark, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    write_batch(folder, 0, make_batches(seed=5, batches=1, rows=60)[0])
    schema = spark.read.parquet(str(folder)).schema
    return spark.readStream.schema(schema).parquet(str(folder)).withWatermark("watermark", "0 seconds")


def _windows(src):
    return window_aggregate(src, key="k", time="ts", window=tumbling("15 seconds"), aggs={"n": ops.count()})


def test_spark_default_is_replaced_by_the_default_parallelism_and_the_checkpoint_keeps_it(spark, tmp_path):
    chosen = str(spark.sparkContext.defaultParallelism)
    kept = spark.conf.get(SHUFFLE_PARTITIONS)
    spark.conf.unset(SHUFFLE_PARTITIONS)  # what a session nobody tuned has: Spark's 200
    try:
        assert spark.conf.get(SHUFFLE_PARTITIONS) == "200"
        src = _stream(spark, tmp_path)
        with pytest.warns(StatefulPartitionsWarning, match=f"jetspark set it to {chosen} "):
            out = _windows(src)
        assert spark.conf.get(SHUFFLE_PARTITIONS) == chosen
        rows: list = []
        q = (out.writeStream.foreachBatch(lambda b, _i: rows.extend(b.collect()))
             .option("checkpointLocation", str(tmp_path / "ck")).start())
        try:
            q.processAllAvailable()
        finally:
            q.stop()
        assert sum(r.n for r in rows) > 0
        metadata = json.loads((tmp_path / "ck" / "offsets" / "0").read_text().splitlines()[1])
        assert metadata["conf"][SHUFFLE_PARTITIONS] == chosen
        stores = [p.name for p in (tmp_path / "ck" / "state" / "0").iterdir() if p.name.isdigit()]
        assert sorted(stores, key=int) == [str(i) for i in range(int(chosen))]
    finally:
        spark.conf.set(SHUFFLE_PARTITIONS, kept)


def test_a_value_the_user_set_is_kept_without_a_warning(spark, tmp_path):
    kept = spark.conf.get(SHUFFLE_PARTITIONS)
    spark.conf.set(SHUFFLE_PARTITIONS, "3")
    try:
        src = _stream(spark, tmp_path)
        with warnings.catch_warnings():
            warnings.simplefilter("error", StatefulPartitionsWarning)
            _windows(src)
        assert spark.conf.get(SHUFFLE_PARTITIONS) == "3"
    finally:
        spark.conf.set(SHUFFLE_PARTITIONS, kept)


def test_a_value_from_the_builder_counts_as_chosen(spark):
    """The fixture's session sets it with the builder (as ``spark-submit --conf`` would): a new
    session of the same application starts from that SparkConf and sees it as chosen."""
    assert set_by_user(spark.newSession(), SHUFFLE_PARTITIONS) is True


def test_a_static_window_leaves_the_setting_alone(spark, tmp_path):
    kept = spark.conf.get(SHUFFLE_PARTITIONS)
    spark.conf.unset(SHUFFLE_PARTITIONS)
    try:
        folder = tmp_path / "in"
        folder.mkdir()
        write_batch(folder, 0, make_batches(seed=6, batches=1, rows=20)[0])
        with warnings.catch_warnings():
            warnings.simplefilter("error", StatefulPartitionsWarning)
            assert _windows(spark.read.parquet(str(folder))).count() > 0
        assert spark.conf.get(SHUFFLE_PARTITIONS) == "200"
    finally:
        spark.conf.set(SHUFFLE_PARTITIONS, kept)
