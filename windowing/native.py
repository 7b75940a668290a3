"""Spark-native equivalents of the built-in operations, for the static tumbling fast path.

A tumbling window has exactly one frame, so the combining stage has nothing to combine:
Spark's own two-phase hash aggregation (partial aggregation inside each input partition
before the shuffle, final aggregation after it — the same "local accumulation, global
combining") computes it in the JVM without a round trip through Python. Used only when
every operation has an equivalent here; user-defined operations always run in Python.
NaN counts as null for jetspark's numpy operations, as a value for Spark's: data with NaN
should use ``engine="python"`` for identical results.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from jetspark.windowing import ops
from jetspark.windowing.aggregate_operation import AggregateOperation


def native_result(op: AggregateOperation) -> Column | None:
    """A Spark aggregate expression with the op's result, or None."""
    t = type(op)
    cols = [F.col(c).cast("double") for c in op.inputs]
    if t is ops.Count:
        return F.count(F.lit(1)) if not op.inputs else F.count(F.col(op.inputs[0]))
    table = {
        ops.Sum: F.sum,
        ops.Mean: F.avg,
        ops.Min: F.min,
        ops.Max: F.max,
        ops.Variance: F.var_samp,
        ops.StdDev: F.stddev_samp,
    }
    if t in table:
        return table[t](cols[0])
    if t is ops.LinearSlope:
        return F.regr_slope(cols[1], cols[0])
    if t is ops.LinearIntercept:
        return F.regr_intercept(cols[1], cols[0])
    return None


def _number(column: str) -> Column:
    """A numeric input as Spark double with NaN as null (jetspark's numpy semantics)."""
    x = F.col(column).cast("double")
    return F.nanvl(x, F.lit(None).cast("double"))


def native_partial_fields(op: AggregateOperation) -> tuple[Column, ...] | None:
    """Spark aggregate expressions computing the op's accumulator fields over the rows of
    one (key, frame) cell — what stage 1 computes in Python — or None.

    Only for operations whose fields Spark computes directly; ``n`` counts the rows whose
    inputs are all non-null, as :func:`.kernels.accumulate_rows` does."""
    t = type(op)
    if t is ops.Count:
        return (F.count(F.lit(1)) if not op.inputs else F.count(_number(op.inputs[0])),)
    if t not in (ops.Sum, ops.Mean, ops.Min, ops.Max, ops.Variance, ops.StdDev):
        return None
    x = _number(op.inputs[0])
    n = F.count(x)
    if t in (ops.Sum, ops.Mean):
        return n, F.coalesce(F.sum(x), F.lit(0.0))
    if t is ops.Min:
        return n, F.coalesce(F.min(x), F.lit(float("inf")))
    if t is ops.Max:
        return n, F.coalesce(F.max(x), F.lit(float("-inf")))
    # Variance / StdDev: (n, mean, sum of squared deviations)
    return n, F.coalesce(F.avg(x), F.lit(0.0)), F.coalesce(F.var_pop(x) * n, F.lit(0.0))
