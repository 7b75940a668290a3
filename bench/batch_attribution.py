"""Where a streaming query's micro-batches spend their time, from Spark's own records.

Per micro-batch of one query run (its ``runId``), read after the run from the driver's SQL
status store (kept with the UI off too):

* ``stage<i>_wall_ms`` / ``stage<i>_run_ms``: each stage's wall time (submission to
  completion) and its tasks' summed ``executorRunTime``, stages numbered in the order the
  micro-batch ran them (stage 1: the source and what runs before the shuffle; the last: the
  stateful operator and the sink);
* ``stages_wall_ms``: the time from the first stage's submission to the last one's
  completion, so ``triggerExecution`` minus it is the driver's own part (offsets, planning,
  the logs, scheduling);
* every timing SQL metric of the plan's nodes, summed over the micro-batch's executions, as
  ``<node>: <metric>`` (the state operator's update, removal and commit times, RocksDB's
  commit phases, the Python nodes' boot, init and processing times, …).

A Python node's "time to initialize Python workers" is not a cost when workers are reused
(Spark's default): a reused worker starts the next task's clock as soon as its last task
ends and then waits for the task, so "initialize" counts the worker's idle time between
micro-batches (its "start" is negative by as much, and Spark drops negative values from the
totals). "time to run Python workers" (the task's start to the worker's finish) is the
node's real time.

The state operator's progress figures (``allUpdatesTimeMs``, ``allRemovalsTimeMs``,
``commitTimeMs``, its custom metrics) come from the query's progress; see
:func:`state_operator`.
"""

from __future__ import annotations

import re
from collections import defaultdict

_BATCH = re.compile(r"runId = ([0-9a-f-]+)\s+batch = (\d+)")
_UNITS_MS = {"ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}
_TOTAL = re.compile(r"\n\s*(-?[\d.,]+) (ms|s|m|h)\b")



def _total_ms(shown: str) -> float | None:
    """The total of a timing metric as the status store formats it
    (``total (min, med, max (stageId: taskId))\\n1.2 s (…)``)."""
    m = _TOTAL.search(shown)
    return None if m is None else float(m.group(1).replace(",", "")) * _UNITS_MS[m.group(2)]


def per_batch(spark, run_id: str) -> dict[int, dict[str, float]]:
    """Per micro-batch id of the run: its stages' times and its plan's timing metrics (ms)."""
    jvm = spark._jvm
    conv = jvm.scala.jdk.javaapi.CollectionConverters
    sql_store = spark._jsparkSession.sharedState().statusStore()
    app_store = spark.sparkContext._jsc.sc().statusStore()
    found: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    stage_times: dict[int, list[tuple[int, float, float, float]]] = defaultdict(list)
    for execution in conv.asJava(sql_store.executionsList()):
        m = _BATCH.search(execution.description() or "")
        if m is None or m.group(1) != run_id:
            continue
        batch = int(m.group(2))
        values = dict(conv.asJava(sql_store.executionMetrics(execution.executionId())).items())
        for node in conv.asJava(sql_store.planGraph(execution.executionId()).allNodes()):
            for metric in conv.asJava(node.metrics()):
                if metric.metricType() not in ("timing", "nsTiming"):
                    continue
                shown = values.get(metric.accumulatorId())
                total = None if shown is None else _total_ms(shown)
                if total is not None:
                    found[batch][f"{node.name()}: {metric.name()}"] += total
        for job_id in conv.asJava(execution.jobs()).keySet():
            for stage_id in conv.asJava(app_store.job(job_id).stageIds()):
                stage = app_store.lastStageAttempt(stage_id)
                if stage.submissionTime().isEmpty() or stage.completionTime().isEmpty():
                    continue  # skipped (its shuffle output reused) or not finished
                stage_times[batch].append((stage_id, float(stage.submissionTime().get().getTime()),
                                           float(stage.completionTime().get().getTime()),
                                           float(stage.executorRunTime())))
    for batch, stages in stage_times.items():
        stages.sort()
        for i, (_sid, start, end, run) in enumerate(stages, 1):
            found[batch][f"stage{i}_wall_ms"] += end - start
            found[batch][f"stage{i}_run_ms"] += run
        found[batch]["stages_wall_ms"] = max(s[2] for s in stages) - min(s[1] for s in stages)
    return {b: dict(v) for b, v in found.items()}


def state_operator(progress: dict) -> dict[str, float]:
    """The first state operator's times and its custom metrics that are times (ms) in one
    progress (empty: none)."""
    ops = progress.get("stateOperators") or []
    if not ops:
        return {}
    op = ops[0]
    out = {k: float(op.get(k, 0)) for k in ("allUpdatesTimeMs", "allRemovalsTimeMs", "commitTimeMs")}
    out |= {f"custom.{k}": float(v) for k, v in (op.get("customMetrics") or {}).items()
            if "Latency" in k or k.endswith("Ms")}  # the times; counts and sizes left out
    return out
