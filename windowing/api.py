"""The public function: ``window_aggregate(df, key=…, time=…, window=…, aggs={…})``.

Example — a 30-second window sliding by 10 seconds, counting events per sensor::

    from jetspark import ops, read_kafka_stream, sliding, window_aggregate

    # the watermark applied, heartbeat rows on (an idle partition still closes windows)
    events = read_kafka_stream(spark, {"kafka.bootstrap.servers": …, "subscribe": …})…
    counts = window_aggregate(
        events, key="sensor", time="timestamp", window=sliding("30 seconds", "10 seconds"),
        aggs={"n": ops.count(), "avg_speed": ops.mean("speed")},
    )
    counts.writeStream.outputMode("append")…

Result columns: the key column(s), ``window_start``, ``window_end`` (timestamps,
window = [start, end)) and one column per aggregate. On a streaming DataFrame each
window is emitted exactly once (append mode), when Spark's event-time watermark reaches
its end; the DataFrame must carry a watermark (``withWatermark`` on the source's
``watermark`` column; ``read_kafka_stream`` applies it, and turns the source's
``watermark.heartbeats`` on). Heartbeat rows (column ``heartbeat`` true) are dropped. A row
behind the watermark is left out of the windows already emitted, and only those. On a
static DataFrame every window is returned.

With ``early_results="10 seconds"`` a streaming query also shows windows while they fill:
at most once per that period of processing time, each key's open windows that changed
since their last emission are emitted as provisional rows; a boolean column ``final``
tells them (false) from the one final row of each window (true), emitted when the
watermark passes its end as without early results (docs/design.md, "Early results").

Rows whose event time is null belong to no window (as with Spark's ``window()`` and
``session_window()``) and are counted: a streaming query reports them per micro-batch as
the observed metric ``jetspark_null_event_time`` (``{"rows": n}`` in
``query.lastProgress["observedMetrics"]``); a static query counts them into the
``Observation`` passed as ``observation`` (``observation.get["rows"]``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    BinaryType,
    DataType,
    LongType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from jetspark import warm_workers
from jetspark.columns import HEARTBEAT, TIMESTAMP_TYPE
from jetspark.windowing.accumulate_by_frame import BLOB, CARRIED_WM, CARRIED_WM_US, stage1_function
from jetspark.windowing.aggregate_operation import EVENT_TIME, AggregateError, AggregateOperation
from jetspark.windowing.combine_to_window import output_schema_fields, step
from jetspark.windowing.definitions import Duration, WindowDefinition
from jetspark.windowing.early_results import FINAL, early_results_us, with_final_column
from jetspark.windowing.inputs import ColumnOrName, Inputs, resolve_inputs
from jetspark.windowing.native import (
    WATERMARK_DELAY_KEY,
    is_numeric,
    native_partial_fields,
    sliding_aggregate,
    tumbling_aggregate,
)
from jetspark.windowing.partitions import choose_stateful_partitions
from jetspark.windowing.plan import BUCKET, FRAME, Plan
from jetspark.windowing.state_store import choose_changelog_checkpointing
from jetspark.windowing.stateful import STATE_DDL, pandas_with_state_function, stateful_processor
from jetspark.worker_python import warn_if_workers_lack_jetspark

_DELAY_KEY = WATERMARK_DELAY_KEY
#: Spark's state APIs a streaming window runs on; the first is the default without early
#: results, the second the default with them (see :func:`chosen_state_api`).
STATE_APIS = ("applyInPandasWithState", "transformWithStateInPandas")
#: What a streaming window's Python workers import (stage 1; the state operator, which needs
#: pandas; the operations their plans pickle), imported by workers warmed beside the build
#: (:mod:`jetspark.warm_workers`).
WARM_MODULES = ("pandas", "jetspark.windowing.accumulate_by_frame", "jetspark.windowing.stateful",
                "jetspark.windowing.ops")
ENGINES = ("auto", "python", "native")  # default first
#: The engines on which a static sliding window of built-in operations is two Spark
#: aggregations (:func:`.native.sliding_aggregate`).
NATIVE_SLIDING = ("native",)
#: Name of the observed metric counting rows with a null event time (streaming).
NULL_TIME_METRIC = "jetspark_null_event_time"
DEFAULT_BUCKETS = 16


def _ddl(name: str, ddl: str) -> StructField:
    return StructField(name, DataType.fromDDL(ddl), True)


def window_aggregate(
    df: DataFrame,
    key: ColumnOrName | Sequence[ColumnOrName],
    time: ColumnOrName,
    window: WindowDefinition,
    aggs: Mapping[str, AggregateOperation],
    *,
    deduct: bool = True,
    buckets: int = DEFAULT_BUCKETS,
    state_api: str | None = None,
    engine: str = "auto",
    observation: Observation | str | None = None,
    early_results: Duration | None = None,
) -> DataFrame:
    """Aggregate ``df`` per key over sliding, tumbling or session windows of an event time.

    The windowed counterpart of ``df.groupBy(key, F.window(time, …)).agg(…)``, computed Jet's
    way: per-(key, frame) partial accumulators combined (and, sliding, deducted) into windows.
    A streaming ``df`` emits each window once, when Spark's event-time watermark passes its
    end (append mode); a static ``df`` returns every window.

    Parameters
    ----------
    df : DataFrame
        The events, static or streaming. A streaming one must carry an event-time watermark:
        ``withWatermark("watermark", "0 seconds")`` on the source's ``watermark`` column
        (``read_kafka_stream`` and ``read_rabbitmq_stream`` apply it). Rows whose
        ``heartbeat`` column is true are dropped.
    key : str, Column, or a sequence of them
        The grouping key column(s). A Column expression is computed before windowing and
        shown under the name Spark gives it (``F.upper("s")`` → ``upper(s)``, or its alias).
        Keys of any type Spark groups by (structs, arrays, maps, doubles: NaN is one key,
        -0.0 is 0.0).
    time : str or Column
        The event time, of type timestamp or timestamp_ntz, as Spark's ``window()`` requires
        (convert epoch milliseconds with ``F.timestamp_millis``). Rows with a null event time
        belong to no window and are counted (``observation``).
    window : SlidingWindow or SessionWindow
        ``sliding(size, slide)``, ``tumbling(size)`` or ``session(timeout)``.
    aggs : Mapping[str, AggregateOperation]
        Result column name → operation, e.g. ``{"n": ops.count(), "avg": ops.avg("x")}``
        (``jetspark.windowing.ops``, or a subclass of
        [`AggregateOperation`][jetspark.windowing.AggregateOperation]).
        Operations take column names or Column expressions.
    deduct : bool, default True
        Slide windows by deducting the frame that leaves (Jet's "previous − trailing frame +
        leading frame") where that is exact: operations with a ``deduct`` over integer
        accumulator fields (counts); float fields are always combined. False: always
        combine frames.
    buckets : int, default 16
        Number of state groups of a streaming query; fixed for the life of its checkpoint.
        Each bucket costs a Python call every micro-batch (and a few state-server round trips
        on ``transformWithStateInPandas``): for a new live query choose as many as the
        stateful stage's tasks (``spark.sql.shuffle.partitions``), see
        docs/how-to/live-latency.md.
    state_api : {"applyInPandasWithState", "transformWithStateInPandas"}, optional
        Spark's stateful API of a streaming query. Default: ``applyInPandasWithState``
        (its first micro-batch takes seconds less, and no state-server round trips after
        it), or ``transformWithStateInPandas`` with ``early_results`` (Spark allows the
        query's update output mode with it only). A checkpoint keeps the API it was
        started with: one written by jetspark 0.1.0 (``transformWithStateInPandas``
        for every query) restarts with ``state_api="transformWithStateInPandas"``
        (``jetspark.windowing.stateful`` has the measurements).
    engine : {"auto", "python", "native"}, default "auto"
        ``"auto"``: static tumbling windows of built-in operations run as Spark's own
        aggregation (all but var_pop, stddev_pop and collect_sorted); static sliding windows
        of operations Spark can accumulate (count, sum, avg, min, max, var_samp,
        stddev_samp) take their per-(key, frame) cells from Spark's aggregation, so only the
        combining stage runs in Python; a streaming query runs on
        the Python engine, which emits a window in the micro-batch whose watermark closes
        it. ``"python"``: never Spark's aggregation. ``"native"``: as ``"auto"``, and a
        streaming tumbling window of built-in operations without early results is Spark's
        own streaming aggregation (a window one micro-batch later; its checkpoint and the
        Python engine's cannot continue each other); a sliding window of built-in
        operations (all but collect_sorted) without early results, static or streaming, is
        two Spark aggregations, frames then windows (on a stream chained, no Python worker;
        a late row whose frame was emitted counts in no window).
    observation : Observation or str, optional
        Where the count of rows with a null event time goes. Static ``df``: a
        ``pyspark.sql.Observation`` that receives ``{"rows": n}`` once the result is
        computed. Streaming ``df``: the name of the observed metric in the query's progress
        (default ``"jetspark_null_event_time"``; two window aggregations in one query need
        two names).
    early_results : str, int, float or timedelta, optional
        Streaming only: the period (processing time; ``0``: every micro-batch) at which each
        key's open windows that changed are also emitted as provisional rows; a boolean
        ``final`` column then tells them (false) from each window's one final row (true).
        None (default): final rows only, no ``final`` column.

    Returns
    -------
    DataFrame
        The key column(s), ``window_start`` and ``window_end`` (timestamps; the window is
        ``[start, end)``), one column per entry of ``aggs`` and, with ``early_results``,
        ``final``.

    Raises
    ------
    AggregateError
        A column is missing or of the wrong type, an argument is out of range, or a
        streaming ``df`` has no watermark.
    WindowDefinitionError
        Raised by ``sliding``/``tumbling``/``session`` for an invalid window.

    Warns
    -----
    UserWarning
        Once, when Spark's Python workers would run an interpreter without jetspark.
    StatefulPartitionsWarning
        A stream whose session leaves ``spark.sql.shuffle.partitions`` at Spark's default
        (with a local master it is set to the default parallelism).

    See Also
    --------
    jetspark.windowing.ops : the built-in operations.
    pyspark.sql.functions.window, pyspark.sql.functions.session_window : Spark's windows,
        whose results these equal.

    Notes
    -----
    A streaming query reports the rows with a null event time per micro-batch as the
    observed metric ``jetspark_null_event_time`` (``{"rows": n}`` in
    ``query.lastProgress["observedMetrics"]``). Design: docs/design.md.

    Examples
    --------
    A 30-second window sliding by 10 seconds, per sensor:

    >>> from pyspark.sql import functions as F
    >>> from jetspark import ops, read_kafka_stream, sliding, window_aggregate
    >>> events = read_kafka_stream(spark, {"kafka.bootstrap.servers": bs, "subscribe": "cars"})
    >>> speeds = events.select("watermark", "heartbeat", "timestamp",
    ...                        F.get_json_object(F.col("value").cast("string"), "$.sensor").alias("sensor"),
    ...                        F.get_json_object(F.col("value").cast("string"), "$.speed")
    ...                        .cast("double").alias("speed"))
    >>> out = window_aggregate(speeds, key="sensor", time="timestamp",
    ...                        window=sliding("30 seconds", "10 seconds"),
    ...                        aggs={"n": ops.count(), "avg_speed": ops.avg("speed"),
    ...                              "max_kmh": ops.max(F.col("speed") * 3.6)})
    """
    warn_if_workers_lack_jetspark(df.sparkSession)
    inputs = resolve_inputs(df, key, time, aggs)
    return inputs.output(_window_aggregate(
        inputs, window, deduct=deduct, buckets=buckets, state_api=state_api, engine=engine,
        observation=observation, early_results=early_results))


def chosen_state_api(state_api: str | None, early_results: bool) -> str:
    """The state API a streaming window runs on: the one asked for, else
    ``applyInPandasWithState``, or ``transformWithStateInPandas`` with early results."""
    if state_api is None:
        return STATE_APIS[1] if early_results else STATE_APIS[0]
    if state_api not in STATE_APIS:
        raise AggregateError(f"state_api must be one of {STATE_APIS}, got {state_api!r}")
    return state_api


def _window_aggregate(
    inputs: Inputs,
    window: WindowDefinition,
    *,
    deduct: bool,
    buckets: int,
    state_api: str | None,
    engine: str,
    observation: Observation | str | None,
    early_results: Duration | None,
) -> DataFrame:
    """:func:`window_aggregate` on resolved inputs (every argument a column name)."""
    df, key, time, aggs = inputs.df, inputs.keys, inputs.time, inputs.aggs
    period_us = early_results_us(early_results)
    plan, heartbeat, partial_fields, out_schema = _prepare(
        df, key, time, window, aggs, deduct, engine, inputs.shown)
    if period_us is not None:
        out_schema = with_final_column(out_schema, [*plan.keys, *plan.names])
        plan = replace(plan, early_results_us=period_us)
    state_api = chosen_state_api(state_api, period_us is not None)
    if not isinstance(buckets, int) or buckets < 1:
        raise AggregateError(f"buckets must be a positive integer, got {buckets!r}")
    if df.isStreaming and observation is not None and not isinstance(observation, str):
        raise AggregateError(
            "observation of a streaming DataFrame is the name (a string) of the observed metric that "
            f"counts rows with a null event time (default {NULL_TIME_METRIC!r}), got {observation!r}"
        )
    if not df.isStreaming and isinstance(observation, str):
        raise AggregateError("observation of a static DataFrame is a pyspark.sql.Observation, got a string")

    src_cols = list(plan.input_columns)
    if not df.isStreaming:
        if period_us is not None:  # every window of a static DataFrame is final
            plan = replace(plan, early_results_us=None)
            out_schema = StructType(out_schema.fields[:-1])
        stages = _batch_stages(df, plan, heartbeat, partial_fields, out_schema, engine, observation)
        out = stages["output"]
        return out if period_us is None else out.withColumn(FINAL, F.lit(True))

    wm_col, delay_ms = _event_time_watermark(df)
    native = None
    if engine == "native":
        native = None if period_us is not None else _native_streaming(
            df, plan, heartbeat, out_schema, delay_ms, observation or NULL_TIME_METRIC)
        if native is None:
            raise AggregateError(
                "engine='native' on a stream runs tumbling and sliding windows of built-in operations "
                "(all but collect_sorted) without early_results (Spark's streaming aggregation); use "
                "engine='auto' for this window")
    warm = warm_workers.enabled(df.sparkSession)  # a malformed setting refused before any is set
    choose_stateful_partitions(df.sparkSession)  # once the call cannot be refused any more
    choose_changelog_checkpointing(df.sparkSession, None if native is not None else state_api)
    if native is not None:
        return native
    if warm:
        warm_workers.warm_python_workers(df.sparkSession, WARM_MODULES)
    for extra in (wm_col, heartbeat):
        if extra is not None and extra not in src_cols:
            src_cols.append(extra)
    # The watermark column keeps Spark's event-time marker, so the stateful operator
    # below sees that the query has a watermark (Spark forbids defining a second one).
    wm_field = StructField(CARRIED_WM, TimestampType(), True, {_DELAY_KEY: delay_ms})
    # stage 1 hands stage 2 one row per (input partition, bucket): the bucket's partial
    # table as Arrow IPC bytes (see .accumulate_by_frame)
    packed_schema = StructType([StructField(BLOB, BinaryType(), True), StructField(BUCKET, LongType(), True),
                                wm_field, StructField(CARRIED_WM_US, LongType(), True)])
    stage2_schema = pa.schema(
        [pa.field(f.name, to_arrow_type(f.dataType, timezone="UTC"), True) for f in partial_fields]
    )
    arrow_packed = pa.schema([(BLOB, pa.binary()), (BUCKET, pa.int64()), (CARRIED_WM, TIMESTAMP_TYPE),
                              (CARRIED_WM_US, pa.int64())])
    stage1 = stage1_function(plan, wm_col, heartbeat, arrow_packed, bucket_column=BUCKET)
    bucket = F.pmod(F.xxhash64(*plan.keys), F.lit(buckets))
    # rows with a null event time are counted here and dropped by stage 1 (after it has
    # read their watermark column)
    df = df.observe(observation or NULL_TIME_METRIC, _null_time_count(plan.time, heartbeat))
    partials = df.select(*src_cols).withColumn(BUCKET, bucket).mapInArrow(stage1, packed_schema)
    key_types = {k: to_arrow_type(df.schema[k].dataType, timezone="UTC") for k in plan.keys}
    # with one withWatermark, the W the rows carry is the one Spark's watermark becomes next
    carried_delay = delay_ms if _watermarks_defined(df) == 1 else None
    grouped = partials.groupBy(BUCKET)
    if state_api == "applyInPandasWithState":
        return grouped.applyInPandasWithState(
            pandas_with_state_function(plan, stage2_schema, key_types, carried_delay),
            out_schema,
            STATE_DDL,
            "append",
            "EventTimeTimeout",
        )
    return grouped.transformWithStateInPandas(
        stateful_processor(plan, stage2_schema, key_types, carried_delay), out_schema, "append", "EventTime"
    )


def window_aggregate_stages(
    df: DataFrame,
    key: ColumnOrName | Sequence[ColumnOrName],
    time: ColumnOrName,
    window: WindowDefinition,
    aggs: Mapping[str, AggregateOperation],
    *,
    deduct: bool = True,
    engine: str = "auto",
    observation: Observation | None = None,
) -> dict[str, DataFrame]:
    """The static query of :func:`window_aggregate` cut after each stage, for measuring
    where its time goes (``bench/bench_windowing.py``): an ordered mapping from stage name
    to a DataFrame computing the query up to and including that stage. ``"input"`` hands
    the input rows over (to Python when stage 1 runs there); ``"to_python"`` (when Spark
    computes the cells) hands the cells to Python and drops them; ``"stage2"`` computes
    every window but drops it; the last entry, ``"output"``, is the query itself."""
    if df.isStreaming:
        raise AggregateError("window_aggregate_stages takes a static DataFrame")
    inputs = resolve_inputs(df, key, time, aggs)
    plan, heartbeat, partial_fields, out_schema = _prepare(
        inputs.df, inputs.keys, inputs.time, window, inputs.aggs, deduct, engine, inputs.shown)
    stages = _batch_stages(inputs.df, plan, heartbeat, partial_fields, out_schema, engine, observation)
    return {name: inputs.output(stage) if name == "output" else stage for name, stage in stages.items()}


def _prepare(
    df: DataFrame, key: str | Sequence[str], time: str, window: WindowDefinition,
    aggs: Mapping[str, AggregateOperation], deduct: bool, engine: str, shown: Mapping[str, str],
) -> tuple[Plan, str | None, list[StructField], StructType]:
    """The checked plan, the heartbeat column (if any), the partial cells' fields and the
    output schema: what every entry point starts from. ``shown``: how messages name a
    computed column (:mod:`.inputs`)."""
    plan = Plan.build(key, time, window, aggs, deduct)
    missing = [c for c in plan.input_columns if c not in df.columns]
    if missing:
        raise AggregateError(f"columns not found: {missing}; the DataFrame has {df.columns}")
    if engine not in ENGINES:
        raise AggregateError(f"engine must be one of {ENGINES}, got {engine!r}")
    time_type = df.schema[plan.time].dataType
    time_shown = shown.get(plan.time, plan.time)
    if not isinstance(time_type, TimestampType | TimestampNTZType):
        raise AggregateError(
            f"the event-time column {time_shown!r} is {time_type.simpleString()}; windows need a timestamp "
            f"(timestamp or timestamp_ntz), as Spark's window() does: convert it first, e.g. "
            f"F.timestamp_millis({time_shown!r}) for epoch milliseconds (timestamp_seconds, "
            "timestamp_micros)")
    for name, op in zip(plan.names, plan.ops, strict=True):
        for c in op.inputs:
            t = df.schema[c].dataType if c != EVENT_TIME else None
            if t is not None and op.reads_values and not is_numeric(t):
                c = shown.get(c, c)
                raise AggregateError(
                    f"aggregate {name!r}: {type(op).__name__} reads numbers, and column {c!r} is "
                    f"{t.simpleString()}; accepted: a numeric or boolean column (cast it first, e.g. "
                    f"F.col({c!r}).cast('double')); count(column) takes any type")
    heartbeat = HEARTBEAT if HEARTBEAT in df.columns else None
    key_fields = [df.schema[k] for k in plan.keys]
    partial_fields = [*key_fields, *(_ddl(n, t) for n, t in plan.partial_spark_fields())]
    out_schema = StructType([*key_fields, *(_ddl(n, t) for n, t in output_schema_fields(plan))])
    return plan, heartbeat, partial_fields, out_schema


def _null_time_count(time: str, heartbeat: str | None) -> Column:
    """Rows with a null event time (heartbeat rows carry none and are not counted)."""
    null = F.col(time).isNull()
    if heartbeat is not None:
        null = null & ~F.coalesce(F.col(heartbeat), F.lit(False))
    return F.count(F.when(null, F.lit(1))).alias("rows")


def _window_rows(df: DataFrame, plan: Plan, heartbeat: str | None) -> DataFrame:
    """The rows that belong to a window: no heartbeat, no null event time (in no window, as
    with Spark's window())."""
    if heartbeat:
        df = df.filter(~F.coalesce(F.col(heartbeat), F.lit(False)))
    return df.filter(F.col(plan.time).isNotNull())


def _native_streaming(
    df: DataFrame, plan: Plan, heartbeat: str | None, out_schema: StructType, delay_ms: int, metric: str
) -> DataFrame | None:
    """Streaming tumbling or sliding windows of built-in operations as Spark's own streaming
    aggregation (:func:`.native.tumbling_aggregate`; sliding: two chained ones,
    :func:`.native.sliding_aggregate`), or None when the window has no such form.
    Null event times are counted into ``metric`` as on the Python engine."""
    # observe also keeps the heartbeat filter above withWatermark: Spark pushes a filter that
    # does not read the event-time column below EventTimeWatermark, and heartbeat rows, which
    # move W on a quiet source, would then never reach it
    counted = df.observe(metric, _null_time_count(plan.time, heartbeat))
    rows = _window_rows(counted, plan, heartbeat)
    native = tumbling_aggregate(rows, plan, out_schema, delay_ms)
    return native if native is not None else sliding_aggregate(rows, plan, out_schema, delay_ms)


_DRAIN_SCHEMA = StructType([StructField("__n", LongType(), True)])


def _drain(batches):
    for _ in batches:
        pass
    return iter(())


def _batch_stages(
    df: DataFrame,
    plan: Plan,
    heartbeat: str | None,
    partial_fields: list[StructField],
    out_schema: StructType,
    engine: str,
    observation: Observation | None = None,
) -> dict[str, DataFrame]:
    """The static query, stage by stage (see :func:`window_aggregate_stages`).

    Three shapes, cheapest first: static tumbling windows of built-in operations are
    Spark's own aggregation (:mod:`.native`); when Spark can compute every operation's
    accumulator fields, stage 1 is Spark's aggregation per (key, frame) after the shuffle
    by key and Python sees each cell once, in stage 2 (one Python round trip); otherwise
    stage 1 runs in Python before the shuffle. There is no IPC packing in a static query:
    stage 2 receives the partial rows as Arrow batches directly.
    """
    src_cols = list(plan.input_columns)
    if observation is not None:
        df = df.observe(observation, _null_time_count(plan.time, heartbeat))
    df = _window_rows(df, plan, heartbeat)
    stages: dict[str, DataFrame] = {}
    if engine in ("auto", "native"):
        native = tumbling_aggregate(df, plan, out_schema)
        if native is None and engine in NATIVE_SLIDING:
            native = sliding_aggregate(df, plan, out_schema)
        if native is not None:
            stages["input"] = df.select(*src_cols)
            stages["output"] = native
            return stages
        cells = _native_cells(df, plan, partial_fields)
        if cells is not None:
            shuffled, cells = cells
            stages["input"] = df.select(*src_cols)
            stages["shuffle"] = shuffled
            stages["stage1"] = cells
            stages["to_python"] = cells.mapInArrow(_drain, _DRAIN_SCHEMA)
            stages["stage2"] = cells.mapInArrow(_batch_stage2(plan, emit=False), out_schema)
            stages["output"] = cells.mapInArrow(_batch_stage2(plan), out_schema)
            return stages
    src = df.select(*src_cols)
    stages["input"] = src.mapInArrow(_drain, _DRAIN_SCHEMA)
    partials = src.mapInArrow(stage1_function(plan), StructType(partial_fields))
    stages["stage1"] = partials
    shuffled = partials.repartition(*plan.keys)
    stages["shuffle"] = shuffled
    stages["stage2"] = shuffled.mapInArrow(_batch_stage2(plan, emit=False), out_schema)
    stages["output"] = shuffled.mapInArrow(_batch_stage2(plan), out_schema)
    return stages


def _native_cells(
    df: DataFrame, plan: Plan, partial_fields: list[StructField]
) -> tuple[DataFrame, DataFrame] | None:
    """Stage 1 as Spark's aggregation per (key, frame), after the shuffle by key: (the
    shuffled input, the partial cells) or None when an operation has no Spark form.

    Shuffling the raw rows by key first keeps one exchange: the aggregation then needs no
    second one (a partitioning by key satisfies grouping by key and frame), and the cells
    of a key meet in one stage-2 partition."""
    if plan.is_session:
        return None
    conf = df.sparkSession.conf.get("spark.sql.requireAllClusterKeysForDistribution", "false")
    if str(conf).lower() == "true":  # Spark would shuffle by (key, frame): a key's cells would split
        return None
    exprs: dict[str, Column] = {}
    for i, op in enumerate(plan.ops):
        if EVENT_TIME in op.inputs:
            return None
        fields = native_partial_fields(op, df.schema)
        if fields is None:
            return None
        for c, e in zip(plan.field_columns(i), fields, strict=True):
            exprs.setdefault(c, e)
    slide = plan.window.slide_us
    t = f"unix_micros(`{plan.time.replace('`', '``')}`)"
    frame = F.expr(f"({t} - pmod({t}, {slide})) div {slide}")  # integer division: a double's is inexact
    inputs = [c for c in plan.input_columns if c != plan.time]
    shuffled = df.select(*inputs, frame.alias(FRAME)).repartition(*plan.keys)
    types = {f.name: f.dataType for f in partial_fields}
    cells = shuffled.groupBy(*plan.keys, FRAME).agg(*(e.cast(types[c]).alias(c) for c, e in exprs.items()))
    return shuffled, cells.select(*(f.name for f in partial_fields))


def _watermarks_defined(df: DataFrame) -> int | None:
    """How many ``withWatermark`` the query's plan holds (None: unknown, e.g. over Spark
    Connect). With several (a union or join of streams), Spark's watermark is their minimum,
    which rows of one of them do not carry."""
    try:
        plan = df._jdf.queryExecution().analyzed().toString()
    except Exception:  # no JVM plan on this client
        return None
    return len(re.findall(r"(?<![A-Za-z])EventTimeWatermark\b", plan))


def _event_time_watermark(df: DataFrame) -> tuple[str, int]:
    """The column ``withWatermark`` was called on, and its delay in ms."""
    for f in df.schema.fields:
        meta = f.metadata or {}
        if _DELAY_KEY in meta:
            return f.name, int(meta[_DELAY_KEY])
    raise AggregateError(
        "a streaming DataFrame needs an event-time watermark: call "
        'df.withWatermark("watermark", "0 seconds") (the source\'s watermark column) first, '
        "or, on a read_kafka_stream / read_rabbitmq_stream frame, keep its watermark and heartbeat "
        "columns in your select (a select without them drops the watermark)"
    )


def _batch_stage2(plan: Plan, *, emit: bool = True):
    """Stage 2 of a static query: all partial rows of the partition, every window
    (``emit`` false: computed, not returned — the breakdown's "stage2")."""

    def run(batches):
        tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
        if not tables:
            return
        res = step(plan, None, pa.concat_tables(tables), None, None)
        if emit and res is not None and res.output.num_rows:
            yield from res.output.to_batches(max_chunksize=1 << 16)

    return run
