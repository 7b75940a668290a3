"""Spark-native equivalents of the built-in operations, for the tumbling fast path.

A tumbling window has exactly one frame, so the combining stage has nothing to combine:
Spark's own two-phase hash aggregation (partial aggregation inside each input partition
before the shuffle, final aggregation after it — the same "local accumulation, global
combining") computes it in the JVM without a round trip through Python. Used only when
every operation has an equivalent here; user-defined operations always run in Python.
Inputs are cast to double with NaN as null, as jetspark's numpy operations read them, so
both engines give the same results on data with NaN.

On a streaming DataFrame the same aggregation is Spark's own streaming aggregation (its
state store, in the JVM) — docs/design.md, "Windowing state (streaming)", native path:
:func:`tumbling_aggregate` groups by the key columns and a window column that carries
Spark's event-time marker, so Spark evicts and emits a window when its watermark reaches
the window's end (``end <= watermark``), in append mode, as the Python engine does.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, DataType, NumericType, StructType

from jetspark.windowing import ops
from jetspark.windowing.aggregate_operation import EVENT_TIME, AggregateOperation
from jetspark.windowing.combine_to_window import WINDOW_END, WINDOW_START
from jetspark.windowing.plan import Plan

#: Metadata key by which Spark finds an aggregation's event-time column (and its delay).
WATERMARK_DELAY_KEY = "spark.watermarkDelayMs"
_WINDOW = "__window"


def native_result(op: AggregateOperation, schema: StructType) -> Column | None:
    """A Spark aggregate expression with the op's result, or None."""
    t = type(op)
    if EVENT_TIME in op.inputs:
        return None
    if t is ops.Count:
        return F.count(F.lit(1)) if not op.inputs else F.count(_counted(op.inputs[0], schema))
    cols = [_number(c) for c in op.inputs]
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


def _counted(column: str, schema: StructType) -> Column:
    """What ``count(column)`` counts: a number as :func:`_number` (NaN is null), any other
    type (string, timestamp, struct …) as it is."""
    return _number(column) if is_numeric(schema[column].dataType) else F.col(column)


def is_numeric(t: DataType) -> bool:
    """Whether jetspark's operations read this Spark type as a number (float64)."""
    return isinstance(t, NumericType | BooleanType)


def native_partial_fields(op: AggregateOperation, schema: StructType) -> tuple[Column, ...] | None:
    """Spark aggregate expressions computing the op's accumulator fields over the rows of
    one (key, frame) cell — what stage 1 computes in Python — or None.

    Only for operations whose fields Spark computes directly; ``n`` counts the rows whose
    inputs are all non-null, as :func:`.kernels.accumulate_rows` does."""
    t = type(op)
    if t is ops.Count:
        return (F.count(F.lit(1)) if not op.inputs else F.count(_counted(op.inputs[0], schema)),)
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


def tumbling_aggregate(
    df: DataFrame, plan: Plan, out_schema: StructType, watermark_delay_ms: int | None = None
) -> DataFrame | None:
    """Tumbling windows of built-in operations as Spark's own aggregation, or None when the
    window is not tumbling or an operation has no Spark form.

    ``df`` holds only rows that belong to a window (no heartbeat, no null event time).
    ``watermark_delay_ms`` (streaming): the window column ``[start, end)`` is a struct
    marked as the event-time column (:data:`WATERMARK_DELAY_KEY`), the way Spark's own
    ``window()`` marks it, so Spark's streaming aggregation evicts a window, and emits it
    in append mode, once its watermark reaches the window's end; rows of a window already
    emitted are dropped by Spark (its late-row rule)."""
    window = plan.window
    if plan.is_session or window.size_us != window.slide_us:
        return None
    results = [native_result(op, df.schema) for op in plan.ops]
    if any(r is None for r in results):
        return None
    t = F.unix_micros(F.col(plan.time))
    start = t - F.pmod(t, F.lit(window.slide_us))
    aggs = [r.cast(DataType.fromDDL(op.result_type)).alias(name)
            for r, op, name in zip(results, plan.ops, plan.names, strict=True)]  # fmt: skip
    if watermark_delay_ms is None:
        agg = df.groupBy(*plan.keys, start.alias("__start_us")).agg(*aggs)
        window_start = F.timestamp_micros("__start_us")
        window_end = F.timestamp_micros(F.col("__start_us") + window.size_us)
    else:
        bounds = F.struct(F.timestamp_micros(start).alias("start"),
                          F.timestamp_micros(start + window.size_us).alias("end"))  # fmt: skip
        marked = bounds.alias(_WINDOW, metadata={WATERMARK_DELAY_KEY: watermark_delay_ms})
        inputs = [c for c in plan.input_columns if c != plan.time]
        # grouped by the attribute (not the expression): Spark looks for the marker there
        agg = df.select(*inputs, marked).groupBy(*plan.keys, _WINDOW).agg(*aggs)
        window_start, window_end = F.col(f"{_WINDOW}.start"), F.col(f"{_WINDOW}.end")
    out = agg.select(*plan.keys, window_start.alias(WINDOW_START), window_end.alias(WINDOW_END), *plan.names)
    return out.select(*(F.col(f.name).cast(f.dataType) for f in out_schema.fields))
