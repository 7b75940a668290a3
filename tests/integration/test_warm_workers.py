"""Python workers warmed beside a streaming window's build (jetspark.windowing.warm_workers),
on the real local Spark."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from jetspark.windowing import AggregateError, ops, tumbling, warm_workers, window_aggregate

pytestmark = pytest.mark.integration


@pytest.fixture
def warming_on(spark, monkeypatch):
    """The setting on (the shared session has it off) and no warm-up on record."""
    monkeypatch.setattr(warm_workers, "_last_start", {})
    spark.conf.set(warm_workers.CONF, "true")
    yield spark
    spark.conf.set(warm_workers.CONF, "false")


def _finished_jobs(spark) -> list[str]:
    tracker = spark.sparkContext.statusTracker()
    return [tracker.getJobInfo(j).status for j in tracker.getJobIdsForGroup(warm_workers.JOB_GROUP)]


def test_a_warm_up_runs_a_job_whose_workers_import_the_query_modules_once_per_period(warming_on):
    before = len(_finished_jobs(warming_on))
    t0 = 1_000_000.0
    first = warm_workers.warm_python_workers(warming_on, clock=lambda: t0)
    assert first is not None
    first.join(timeout=300)
    assert not first.is_alive()
    statuses = _finished_jobs(warming_on)
    assert len(statuses) == before + 1 and statuses[-1] == "SUCCEEDED"
    # within the period nothing more; after it, another one
    assert warm_workers.warm_python_workers(warming_on, clock=lambda: t0 + 1) is None
    again = warm_workers.warm_python_workers(warming_on, clock=lambda: t0 + warm_workers.EVERY_S + 1)
    assert again is not None
    again.join(timeout=300)
    assert len(_finished_jobs(warming_on)) == before + 2


def test_building_a_streaming_window_starts_it_and_a_static_one_does_not(warming_on, tmp_path):
    events = (warming_on.readStream.format("rate").option("rowsPerSecond", 5).load()
              .select((F.col("value") % 3).alias("k"), "timestamp").withWatermark("timestamp", "1 second"))
    window_aggregate(warming_on.range(3).select("id", F.current_timestamp().alias("t")), key="id", time="t",
                     window=tumbling("1 second"), aggs={"n": ops.count()})
    assert warm_workers._last_start == {}
    window_aggregate(events, key="k", time="timestamp", window=tumbling("1 second"), aggs={"n": ops.count()})
    assert list(warm_workers._last_start) == [warming_on.sparkContext.applicationId]


def test_off_starts_nothing_and_a_malformed_setting_is_refused_naming_it(spark, monkeypatch):
    monkeypatch.setattr(warm_workers, "_last_start", {})
    assert warm_workers.warm_python_workers(spark) is None  # the shared session has it off
    spark.conf.set(warm_workers.CONF, "sometimes")
    try:
        events = spark.readStream.format("rate").load().withWatermark("timestamp", "1 second")
        with pytest.raises(AggregateError, match=r"spark\.jetspark\.warmPythonWorkers.*'sometimes'"):
            window_aggregate(events, key="value", time="timestamp", window=tumbling("1 second"),
                             aggs={"n": ops.count()})
    finally:
        spark.conf.set(warm_workers.CONF, "false")
    assert warm_workers._last_start == {}
