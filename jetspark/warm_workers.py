"""Python workers started while a streaming query is being built, before its first
micro-batch needs them.

A streaming query of jetspark's starts its Python processes in its first micro-batch: per
input task the source's reader (and a window's stage 1), per stateful task a window's state
operator and the sink's writer, and runners on the driver; each spends 0.5–0.9 s importing
PySpark's worker, pyarrow, pandas and jetspark before its first row. Spark's own Kafka
source and ``window()`` start none. Spark keeps a finished Python worker for the next task
that needs one (until it has been idle 60 s). So :func:`jetspark.datasources.read_kafka_stream`,
:func:`jetspark.datasources.read_rabbitmq_stream` and a streaming
:func:`jetspark.windowing.window_aggregate` start, in a background thread, a small job
whose tasks each hold two workers (two chained ``mapInArrow``) that import the modules the
query's workers will import (the format's reader and writer; the windowing stages and
pandas); the query's first tasks then find them ready. ``bench/bench_start.py`` measures it
(see the live-latency page of the documentation).

Classic sessions only (over Spark Connect the client has no SparkContext to run it on); a
given set of modules at most once per 30 s per Spark application; it never fails the build
(an error in the job is logged at debug level on ``jetspark.warm_workers``). Off with the
Spark setting ``spark.jetspark.warmPythonWorkers=false``.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Iterator, Sequence

from jetspark.connect import is_connect
from jetspark.errors import OptionError
from jetspark.worker_python import workers_can_import_jetspark

CONF = "spark.jetspark.warmPythonWorkers"
JOB_GROUP = "jetspark-warm-python-workers"
JOB_DESCRIPTION = "jetspark: starting Python workers for a streaming query"
EVERY_S = 30.0  # a session building many queries warms its workers once in this long

log = logging.getLogger("jetspark.warm_workers")
_lock = threading.Lock()
_last_start: dict[tuple[str, tuple[str, ...]], float] = {}  # (application id, modules) -> when


def enabled(spark) -> bool:
    """The session's :data:`CONF` (default true); a value other than true/false is refused
    with an :class:`~jetspark.errors.OptionError` naming the setting and the value."""
    value = str(spark.conf.get(CONF, "true")).strip().lower()
    if value not in ("true", "false"):
        raise OptionError(CONF, value, "true or false (whether to warm Python workers beside a streaming "
                          "query's build)")
    return value == "true"


def warm_python_workers(spark, modules: Sequence[str], *, clock=time.monotonic) -> threading.Thread | None:
    """Start the warm-up job for ``modules`` (importable names) in a daemon thread and return
    the thread; None when it is off, the session is a Spark Connect one, its workers' Python
    lacks jetspark (a ``WorkerPythonWarning`` says so; the job would only add a failed job's
    traceback), or this application warmed workers with these modules less than
    :data:`EVERY_S` ago."""
    if is_connect(spark) or not enabled(spark) or not workers_can_import_jetspark(spark):
        return None
    sc = spark.sparkContext
    key, now = (sc.applicationId, tuple(modules)), clock()
    with _lock:
        if now - _last_start.get(key, float("-inf")) < EVERY_S:
            return None
        _last_start[key] = now
    tasks = max(int(sc.defaultParallelism), 1)
    thread = threading.Thread(target=_run, args=(spark, tasks, tuple(modules)), name=JOB_GROUP, daemon=True)
    thread.start()
    return thread


def _run(spark, tasks: int, modules: tuple[str, ...]) -> None:
    try:
        # job groups are per thread (PySpark pins Python threads to JVM threads)
        spark.sparkContext.setJobGroup(JOB_GROUP, JOB_DESCRIPTION, interruptOnCancel=False)
        importer = _Importer(modules)
        job = spark.range(0, tasks, 1, numPartitions=tasks).mapInArrow(importer, "id long")
        job.mapInArrow(importer, "id long").write.format("noop").mode("overwrite").save()
    except Exception as e:  # a stopped session, a cancelled job: the query does without
        log.debug("warming Python workers did not finish: %s", type(e).__name__)


class _Importer:
    """The job's ``mapInArrow`` function: in a worker, import the modules, pass the rows on."""

    def __init__(self, modules: tuple[str, ...]) -> None:
        self.modules = modules

    def __call__(self, batches: Iterator) -> Iterator:
        for name in self.modules:
            importlib.import_module(name)
        yield from batches
