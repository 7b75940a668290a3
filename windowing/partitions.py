"""How many tasks a streaming window's stateful stage runs in, when the user chose none.

Spark runs a streaming query's stateful operator in ``spark.sql.shuffle.partitions`` tasks,
a number a new checkpoint takes from the session when the query starts and keeps for good.
Every micro-batch, each of those tasks commits its state store (and, with
``transformWithStateInPandas``, opens a session with Spark's Python state server), whatever
it carries: a fixed cost per task (``bench/bench_live.py``'s ``floor`` contender measures
it). At Spark's default of 200 a live micro-batch on 2 cores takes about 10 s for Spark's
own ``window()`` and about 20 s on the Python engine.

So a streaming :func:`~jetspark.windowing.window_aggregate` on a local master
(``local[N]``), whose session leaves that setting at Spark's default, sets it for the
session to the default parallelism (the local cores, or ``spark.default.parallelism``) and
says so once with a :class:`StatefulPartitionsWarning`. A value the user set (session,
builder, ``spark-submit --conf``) is never changed. On a cluster the cores present when the
query starts may be far fewer than it will have (dynamic allocation starts from none), and
the checkpoint would keep that number, so there, and over Spark Connect (whose client cannot
tell Spark's default from a chosen 200), a value of 200 only gets the warning, as advice.
An existing checkpoint keeps its own count whatever the session says.
"""

from __future__ import annotations

import warnings

from jetspark.connect import is_connect

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
SPARK_DEFAULT = "200"


class StatefulPartitionsWarning(UserWarning):
    """``spark.sql.shuffle.partitions`` is (or was) Spark's default of 200 for a streaming window."""


def set_by_user(spark, key: str) -> bool | None:
    """Whether the session's setting ``key`` was set by someone, not left at Spark's default
    (None: this client cannot tell: a Connect session, or a JVM it cannot ask)."""
    if is_connect(spark):
        return None
    try:
        return bool(spark._jsparkSession.sessionState().conf().contains(key))
    except Exception:  # e.g. py4j access to the session state refused
        return None


def choose_stateful_partitions(spark) -> int | None:
    """On a local master, set ``spark.sql.shuffle.partitions`` to the default parallelism
    when it is at Spark's default, and return that number; elsewhere warn when it is 200.
    None when nothing was set."""
    chosen_by_user = set_by_user(spark, SHUFFLE_PARTITIONS)
    if chosen_by_user:
        return None
    local = chosen_by_user is False and spark.sparkContext.master.startswith("local")
    if not local:
        if spark.conf.get(SHUFFLE_PARTITIONS) == SPARK_DEFAULT:
            _warn(f"{SHUFFLE_PARTITIONS} is {SPARK_DEFAULT} (Spark's default)", "Set it to about the cores "
                  "the query's executors have before its first start")
        return None
    chosen = max(int(spark.sparkContext.defaultParallelism), 1)
    spark.conf.set(SHUFFLE_PARTITIONS, str(chosen))
    _warn(f"{SHUFFLE_PARTITIONS} was left at Spark's default ({SPARK_DEFAULT}); jetspark set it to {chosen} "
          "(the default parallelism) for this session, so for its later queries too",
          f"Set {SHUFFLE_PARTITIONS} yourself to choose another")
    return chosen


def _warn(what: str, advice: str) -> None:
    warnings.warn(
        f"{what}. Every task of a streaming query's stateful stage costs a state-store commit per "
        f"micro-batch whatever it carries, and a new checkpoint keeps the number for good. {advice} "
        "(docs/how-to/live-latency.md).",
        StatefulPartitionsWarning,
        stacklevel=4,
    )
