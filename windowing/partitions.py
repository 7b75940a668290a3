"""How many tasks a streaming window's stateful stage runs in, when the user chose none.

Spark runs a streaming query's stateful operator in ``spark.sql.shuffle.partitions`` tasks,
a number the checkpoint keeps from its first micro-batch. Every micro-batch, each of those
tasks commits its state store and, on the Python engine, opens a session with Spark's
Python state server, whatever it carries: a fixed cost per task (``bench/bench_live.py``'s
``floor`` contender measures it). At Spark's default of 200, a live micro-batch on a small
cluster lasts tens of seconds, for Spark's own ``window()`` as for jetspark.

So a streaming :func:`~jetspark.windowing.window_aggregate` whose session leaves that setting
at Spark's default sets it, for the session, to Spark's default parallelism (the cores the
application has) and says so once with a :class:`StatefulPartitionsWarning`. A value the
user set (session, ``spark-submit --conf``, builder) is never changed, nor one a checkpoint
already holds (Spark restores it on restart). Over Spark Connect the client cannot tell a
default from a chosen value: nothing is changed there.
"""

from __future__ import annotations

import warnings

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


class StatefulPartitionsWarning(UserWarning):
    """jetspark set ``spark.sql.shuffle.partitions`` for a streaming window's stateful stage."""


def user_set(spark) -> bool | None:
    """Whether the session's ``spark.sql.shuffle.partitions`` was set by someone (None:
    this client cannot tell, e.g. over Spark Connect)."""
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is None:
        return None
    try:
        return bool(jsession.sessionState().conf().contains(SHUFFLE_PARTITIONS))
    except Exception:  # a JVM without SQLConf.contains: leave the setting alone
        return None


def choose_stateful_partitions(spark) -> int | None:
    """Set ``spark.sql.shuffle.partitions`` to the default parallelism when it is at Spark's
    default; the number set, or None when the setting was left alone."""
    if user_set(spark) is not False:
        return None
    chosen = max(int(spark.sparkContext.defaultParallelism), 1)
    spark.conf.set(SHUFFLE_PARTITIONS, str(chosen))
    warnings.warn(
        f"{SHUFFLE_PARTITIONS} was left at Spark's default (200); jetspark set it to {chosen} (the "
        "default parallelism) for this session, since every task of a streaming query's stateful "
        "stage costs a state-store commit per micro-batch whatever it carries. A checkpoint keeps "
        f"the number from its first micro-batch. Set {SHUFFLE_PARTITIONS} yourself to choose another "
        "(README, \"Live queries\").",
        StatefulPartitionsWarning,
        stacklevel=3,
    )
    return chosen
