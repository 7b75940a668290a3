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


# --- sliding windows: two Spark aggregations (frames, then windows) ----------------------------
_FRAME = "__frame"
_WSTART = "__wstart"
_EPS64 = 64 * 2.220446049250313e-16  # 64 × float64 epsilon: the Python engine's rounding noise


class _Sliding:
    """One operation on the native sliding path: the partial aggregates of a (key, frame)
    cell (stage 1), their merge per (key, window) (stage 2) and the result from the merge."""

    def __init__(self, cells: dict[str, Column], merged: dict[str, Column], result: Column) -> None:
        self.cells, self.merged, self.result = cells, merged, result


def _moments(n: Column, mean: Column, m2: Column) -> Column:
    return F.struct(n.cast("bigint").alias("n"), mean.cast("double").alias("mean"),
                    m2.cast("double").alias("m2"))  # fmt: skip


def _merge_moments(a: Column, b: Column) -> Column:
    """Chan et al.'s pairwise merge of (n, mean, M2), as the Python engine's combine."""
    n = a.n + b.n
    d = b.mean - a.mean
    merged = _moments(n, a.mean + d * (b.n / n), a.m2 + b.m2 + d * d * (a.n * b.n / n))
    return F.when(b.n == 0, a).when(a.n == 0, b).otherwise(merged)


def _regression(n: Column, rx: Column, mx: Column, my: Column, cxx: Column, cxy: Column) -> Column:
    names = ("n", "rx", "mx", "my", "cxx", "cxy")
    cols = [n.cast("bigint"), *(c.cast("double") for c in (rx, mx, my, cxx, cxy))]
    return F.struct(*(c.alias(name) for c, name in zip(cols, names, strict=True)))


def _merge_regression(a: Column, b: Column) -> Column:
    """The Python engine's ``LinearSlope.combine``: both sides moved to the smaller reference
    ``rx``, then Chan et al.'s merge of (n, mean x, mean y, cxx, cxy)."""
    ref = F.least(a.rx, b.rx)
    amx, bmx = a.mx + (a.rx - ref), b.mx + (b.rx - ref)
    n = a.n + b.n
    w, f = a.n * b.n / n, b.n / n
    dx, dy = bmx - amx, b.my - a.my
    merged = _regression(n, ref, amx + dx * f, a.my + dy * f, a.cxx + b.cxx + dx * dx * w,
                         a.cxy + b.cxy + dx * dy * w)  # fmt: skip
    return F.when(b.n == 0, a).when(a.n == 0, b).otherwise(merged)


def _sliding_op(op: AggregateOperation, i: int, schema: StructType) -> _Sliding | None:
    """The native sliding form of a built-in operation, or None (user-defined operations,
    the event time as an input, collect_sorted)."""
    t = type(op)
    if EVENT_TIME in op.inputs:
        return None
    p = f"__p{i}_"

    def col(name: str) -> Column:
        return F.col(p + name)

    if t is ops.Count:
        n = F.count(F.lit(1)) if not op.inputs else F.count(_counted(op.inputs[0], schema))
        return _Sliding({p + "n": n}, {p + "n": F.sum(col("n"))}, col("n"))
    if t is ops.LinearSlope or t is ops.LinearIntercept:
        x0, y0 = (_number(c) for c in op.inputs)
        x, y = F.when(y0.isNotNull(), x0), F.when(x0.isNotNull(), y0)  # rows where both are numbers
        n, rx = F.count(x), F.min(x)
        cell = _regression(n, F.coalesce(rx, F.lit(0.0)), F.coalesce(F.avg(x) - rx, F.lit(0.0)),
                           F.coalesce(F.avg(y), F.lit(0.0)), F.coalesce(F.var_pop(x) * n, F.lit(0.0)),
                           F.coalesce(F.covar_pop(x, y) * n, F.lit(0.0)))  # fmt: skip
        zero = _regression(F.lit(0), *(F.lit(0.0) for _ in range(5)))
        acc = F.aggregate(F.collect_list(col("r")), zero, _merge_regression)
        a = col("r")
        noise = F.lit(_EPS64) * a.n * (a.mx * a.mx + F.abs(a.cxx) / F.greatest(a.n, F.lit(1)))
        bad = (a.n < 2) | (a.cxx <= noise)
        slope = a.cxy / a.cxx
        value = slope if t is ops.LinearSlope else a.my - slope * (a.rx + a.mx)
        return _Sliding({p + "r": cell}, {p + "r": acc}, F.when(~bad, value))
    x = _number(op.inputs[0])
    if t is ops.Sum:
        return _Sliding({p + "s": F.sum(x)}, {p + "s": F.sum(col("s"))}, col("s"))
    if t is ops.Mean:
        cells = {p + "n": F.count(x), p + "s": F.sum(x)}
        merged = {p + "n": F.sum(col("n")), p + "s": F.sum(col("s"))}
        return _Sliding(cells, merged, F.when(col("n") > 0, col("s") / col("n")))
    if t in (ops.Min, ops.Max):
        fn = F.min if t is ops.Min else F.max
        return _Sliding({p + "m": fn(x)}, {p + "m": fn(col("m"))}, col("m"))
    if t in (ops.Variance, ops.StdDev, ops.VarPop, ops.StdDevPop):
        n = F.count(x)
        cell = _moments(n, F.coalesce(F.avg(x), F.lit(0.0)), F.coalesce(F.var_pop(x) * n, F.lit(0.0)))
        zero = _moments(F.lit(0), F.lit(0.0), F.lit(0.0))
        acc = F.aggregate(F.collect_list(col("v")), zero, _merge_moments)
        a, ddof = col("v"), op.ddof
        var = F.when(a.n > ddof, F.greatest(a.m2, F.lit(0.0)) / (a.n - ddof))
        return _Sliding({p + "v": cell}, {p + "v": acc}, F.sqrt(var) if issubclass(t, ops.StdDev) else var)
    return None


def sliding_aggregate(
    df: DataFrame, plan: Plan, out_schema: StructType, watermark_delay_ms: int | None = None
) -> DataFrame | None:
    """Sliding windows of built-in operations as two Spark aggregations, or None when the
    window is tumbling or session, or an operation has no native form.

    Stage 1 groups the rows by (keys, frame = one slide) into mergeable partial aggregates
    (counts, sums, minima, maxima; (n, mean, M2) and the regression's co-moments, computed
    by Spark within a frame); stage 2 gives each frame to the ``size / slide`` windows that
    contain it, merges the partials per (keys, window) — moments by Chan et al.'s formulas,
    as the Python engine combines them — and finishes.

    ``watermark_delay_ms`` (streaming): both stages are Spark's streaming aggregations,
    chained in append mode. Stage 1's frame ``[start, end)`` is marked as the event-time
    column (:data:`WATERMARK_DELAY_KEY`), so Spark emits a frame once its watermark reaches
    the frame's end; stage 2's window column is marked the same way, so Spark emits a
    window once the watermark reaches the window's end, in the micro-batch that emits its
    last frame. A row is dropped when its frame was already emitted (Spark's late-row rule,
    with the previous micro-batch's watermark)."""
    window = plan.window
    if plan.is_session or window.size_us == window.slide_us:
        return None
    parts = [_sliding_op(op, i, df.schema) for i, op in enumerate(plan.ops)]
    if any(part is None for part in parts):
        return None
    slide, size, k = window.slide_us, window.size_us, window.frames_per_window
    cells_aggs = [c.alias(name) for part in parts for name, c in part.cells.items()]
    merged_aggs = [c.alias(name) for part in parts for name, c in part.merged.items()]
    partial_names = [name for part in parts for name in part.cells]
    t = F.unix_micros(F.col(plan.time))
    start = t - F.pmod(t, F.lit(slide))
    inputs = [c for c in plan.input_columns if c != plan.time]
    # the windows that hold a frame starting at f start at f, f - slide, …, f - (k - 1)·slide
    def starts(f: Column) -> Column:
        return F.explode(F.sequence(f - F.lit((k - 1) * slide), f, F.lit(slide))).alias(_WSTART)

    if watermark_delay_ms is None:
        frames = df.groupBy(*plan.keys, start.alias(_FRAME)).agg(*cells_aggs)
        spread = frames.select(*plan.keys, *partial_names, starts(F.col(_FRAME)))
        agg = spread.groupBy(*plan.keys, _WSTART).agg(*merged_aggs)
        window_start = F.timestamp_micros(_WSTART)
        window_end = F.timestamp_micros(F.col(_WSTART) + size)
    else:
        meta = {WATERMARK_DELAY_KEY: watermark_delay_ms}
        frame = _bounds(start, start + slide).alias(_FRAME, metadata=meta)
        frames = df.select(*inputs, frame).groupBy(*plan.keys, _FRAME).agg(*cells_aggs)
        f = F.unix_micros(F.col(f"{_FRAME}.start"))
        spread = frames.select(*plan.keys, *partial_names, starts(f))
        bounds = _bounds(F.col(_WSTART), F.col(_WSTART) + size).alias(_WINDOW, metadata=meta)
        # grouped by the attribute (not the expression): Spark looks for the marker there
        agg = spread.select(*plan.keys, *partial_names, bounds).groupBy(*plan.keys, _WINDOW).agg(*merged_aggs)
        window_start, window_end = F.col(f"{_WINDOW}.start"), F.col(f"{_WINDOW}.end")
    results = [part.result.cast(DataType.fromDDL(op.result_type)).alias(name)
               for part, op, name in zip(parts, plan.ops, plan.names, strict=True)]  # fmt: skip
    out = agg.select(*plan.keys, window_start.alias(WINDOW_START), window_end.alias(WINDOW_END), *results)
    return out.select(*(F.col(f.name).cast(f.dataType) for f in out_schema.fields))



def _bounds(start_us: Column, end_us: Column) -> Column:
    """A ``[start, end)`` struct of timestamps, as Spark's ``window()`` column."""
    return F.struct(F.timestamp_micros(start_us).alias("start"), F.timestamp_micros(end_us).alias("end"))
