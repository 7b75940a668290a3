"""Python workers started while a streaming window is being built, before its first
micro-batch needs them.

A streaming :func:`~jetspark.windowing.window_aggregate` on the Python engine starts about
seven Python processes in its first micro-batch (per input task the source's reader and
stage 1, per stateful task the state operator and the sink's writer, and runners on the
driver), each spending 0.5–0.9 s importing PySpark's worker, pandas, pyarrow and jetspark
before its first row; Spark's own ``window()`` starts none. Spark keeps a finished Python
worker for the next task that needs one (until it has been idle 60 s). So building a
streaming window starts, in a background thread, a small job whose tasks each hold two
workers (two chained ``mapInArrow``) that import what the query's workers import; the
query's first tasks then find them ready. Measured in ``bench/bench_start.py`` and
``bench/bench_live.py`` (see the live-latency page of the documentation).

Classic sessions only (over Spark Connect the client has no SparkContext to run it on); at
most once per 30 s per Spark application; it never fails or delays the build (the job runs
beside it, and an error in it is logged at debug level on ``jetspark.windowing``). Off with
the Spark setting ``spark.jetspark.warmPythonWorkers=false``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

from jetspark.connect import is_connect
from jetspark.windowing.aggregate_operation import AggregateError

CONF = "spark.jetspark.warmPythonWorkers"
JOB_GROUP = "jetspark-warm-python-workers"
JOB_DESCRIPTION = "jetspark: starting Python workers for a streaming window"
EVERY_S = 30.0  # a session building many windows warms its workers once in this long

log = logging.getLogger("jetspark.windowing")
_lock = threading.Lock()
_last_start: dict[str, float] = {}  # Spark application id -> when its last warm-up started


def enabled(spark) -> bool:
    """The session's :data:`CONF` (default true); another value than true/false is refused,
    naming the setting and the value."""
    value = str(spark.conf.get(CONF, "true")).strip().lower()
    if value not in ("true", "false"):
        raise AggregateError(f"{CONF} must be true or false, got {value!r}")
    return value == "true"


def warm_python_workers(spark, *, clock=time.monotonic) -> threading.Thread | None:
    """Start the warm-up job in a daemon thread and return the thread; None when it is off,
    the session is a Spark Connect one, or this application warmed its workers less than
    :data:`EVERY_S` ago."""
    if is_connect(spark) or not enabled(spark):
        return None
    sc = spark.sparkContext
    app, now = sc.applicationId, clock()
    with _lock:
        if now - _last_start.get(app, float("-inf")) < EVERY_S:
            return None
        _last_start[app] = now
    tasks = max(int(sc.defaultParallelism), 1)
    thread = threading.Thread(target=_run, args=(spark, tasks), name=JOB_GROUP, daemon=True)
    thread.start()
    return thread


def _run(spark, tasks: int) -> None:
    try:
        # job groups are per thread (PySpark pins Python threads to JVM threads)
        spark.sparkContext.setJobGroup(JOB_GROUP, JOB_DESCRIPTION, interruptOnCancel=False)
        job = (
            spark.range(0, tasks, 1, numPartitions=tasks)
            .mapInArrow(_import_query_modules, "id long")
            .mapInArrow(_import_query_modules, "id long")
        )
        job.write.format("noop").mode("overwrite").save()
    except Exception as e:  # a stopped session, a cancelled job: the query does without
        log.debug("warming Python workers did not finish: %s", type(e).__name__)


def _import_query_modules(batches: Iterator) -> Iterator:
    """In a worker: import what a streaming window's workers import (pandas for the state
    operator, jetspark's windowing stages, jetkafka's reader), then pass the rows on."""
    import pandas  # noqa: F401

    import jetspark.datasources.kafka.source
    import jetspark.windowing.accumulate_by_frame
    import jetspark.windowing.stateful  # noqa: F401

    yield from batches
