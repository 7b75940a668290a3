"""Python workers warmed beside a streaming query's build (jetspark.warm_workers), on the real
local Spark."""

from __future__ import annotations

import threading

import pytest
from pyspark.sql import functions as F

from jetspark import warm_workers
from jetspark.datasources import read_kafka_stream
from jetspark.errors import OptionError
from jetspark.windowing import ops, tumbling, window_aggregate
from jetspark.windowing.api import WARM_MODULES

pytestmark = pytest.mark.integration


@pytest.fixture
def warming_on(spark, monkeypatch):
    """The setting on (the shared session has it off) and no warm-up on record; afterwards every
    warm-up job the test started has ended (the shared session's next test runs without it)."""
    monkeypatch.setattr(warm_workers, "_last_start", {})
    spark.conf.set(warm_workers.CONF, "true")
    yield spark
    spark.conf.set(warm_workers.CONF, "false")
    _join_warm_ups()


def _join_warm_ups(timeout_s: float = 300) -> None:
    """Waits for the warm-up jobs' threads started in this process (their name is the job group)."""
    for thread in threading.enumerate():
        if thread.name == warm_workers.JOB_GROUP:
            thread.join(timeout=timeout_s)
            assert not thread.is_alive(), f"a warm-up job did not end within {timeout_s} s"


def _job_statuses(spark) -> list[str]:
    tracker = spark.sparkContext.statusTracker()
    return [tracker.getJobInfo(j).status for j in sorted(tracker.getJobIdsForGroup(warm_workers.JOB_GROUP))]


def test_a_warm_up_job_imports_the_modules_in_workers_once_per_period(warming_on):
    before = len(_job_statuses(warming_on))
    t0 = 1_000_000.0
    first = warm_workers.warm_python_workers(warming_on, WARM_MODULES, clock=lambda: t0)
    assert first is not None
    first.join(timeout=300)
    assert not first.is_alive()
    assert _job_statuses(warming_on)[before:] == ["SUCCEEDED"]
    # the same modules within the period: nothing; other modules or after it: another job
    assert warm_workers.warm_python_workers(warming_on, WARM_MODULES, clock=lambda: t0 + 1) is None
    period = warm_workers.EVERY_S
    later = warm_workers.warm_python_workers(warming_on, WARM_MODULES, clock=lambda: t0 + period + 1)
    other = warm_workers.warm_python_workers(warming_on, ("jetspark.columns",), clock=lambda: t0 + 1)
    for thread in (later, other):
        assert thread is not None
        thread.join(timeout=300)
    assert _job_statuses(warming_on)[before:] == ["SUCCEEDED"] * 3


def test_a_module_the_workers_cannot_import_fails_the_job_not_the_caller(warming_on):
    before = len(_job_statuses(warming_on))
    thread = warm_workers.warm_python_workers(warming_on, ("jetspark.no_such_module",))
    assert thread is not None
    thread.join(timeout=300)
    assert _job_statuses(warming_on)[before:] == ["FAILED"]


def test_a_streaming_read_and_window_start_one_each_a_static_window_none(warming_on, kafka_bootstrap,
                                                                          kafka_topic):
    app = warming_on.sparkContext.applicationId
    count = {"n": ops.count()}
    static = warming_on.range(3).select("id", F.current_timestamp().alias("t"))
    window_aggregate(static, key="id", time="t", window=tumbling("1 second"), aggs=count)
    assert warm_workers._last_start == {}
    events = read_kafka_stream(warming_on, {"kafka.bootstrap.servers": kafka_bootstrap,
                                            "subscribe": kafka_topic()})
    assert list(warm_workers._last_start) == [(app, ("pyspark_jetkafka",))]
    window_aggregate(events, key="key", time="timestamp", window=tumbling("1 second"), aggs=count)
    assert list(warm_workers._last_start) == [(app, ("pyspark_jetkafka",)), (app, WARM_MODULES)]


def test_off_starts_nothing_and_a_malformed_setting_is_refused_naming_it(spark, monkeypatch):
    monkeypatch.setattr(warm_workers, "_last_start", {})
    assert warm_workers.warm_python_workers(spark, WARM_MODULES) is None  # the shared session has it off
    spark.conf.set(warm_workers.CONF, "sometimes")
    try:
        events = spark.readStream.format("rate").load().withWatermark("timestamp", "1 second")
        with pytest.raises(OptionError, match=r"warmPythonWorkers'.*'sometimes'.*true or false"):
            window_aggregate(events, key="value", time="timestamp", window=tumbling("1 second"),
                             aggs={"n": ops.count()})
    finally:
        spark.conf.set(warm_workers.CONF, "false")
    assert warm_workers._last_start == {}
