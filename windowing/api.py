"""The public function: ``window_aggregate(df, key=…, time=…, window=…, aggs={…})``.

Example — a 30-second window sliding by 10 seconds, counting events per sensor::

    from jetspark.windowing import ops, sliding, window_aggregate

    events = (spark.readStream.format("jetkafka")…load()
              .withWatermark("watermark", "0 seconds"))
    counts = window_aggregate(
        events, key="sensor", time="timestamp", window=sliding("30 seconds", "10 seconds"),
        aggs={"n": ops.count(), "avg_speed": ops.mean("speed")},
    )
    counts.writeStream.outputMode("append")…

Result columns: the key column(s), ``window_start``, ``window_end`` (timestamps,
window = [start, end)) and one column per aggregate. On a streaming DataFrame each
window is emitted exactly once (append mode), when Spark's event-time watermark reaches
its end; the DataFrame must carry a watermark (``withWatermark`` on the source's
``watermark`` column). Heartbeat rows (column ``heartbeat`` true) are dropped. On a
static DataFrame every window is returned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import BinaryType, DataType, LongType, StructField, StructType, TimestampType

from .aggregate import AggregateError, AggregateOperation
from .native import native_result
from .plan import BUCKET, TS_TYPE, Plan
from .stage1 import BLOB, WATERMARK, stage1_function
from .stage2 import WINDOW_END, WINDOW_START, output_schema_fields, step
from .state import STATE_DDL, pandas_with_state_function, stateful_processor
from .windows import WindowDefinition

HEARTBEAT = "heartbeat"
_DELAY_KEY = "spark.watermarkDelayMs"
STATE_APIS = ("transformWithStateInPandas", "applyInPandasWithState")  # default first
DEFAULT_BUCKETS = 16


def _ddl(name: str, ddl: str) -> StructField:
    return StructField(name, DataType.fromDDL(ddl), True)


def window_aggregate(
    df: DataFrame,
    key: str | Sequence[str],
    time: str,
    window: WindowDefinition,
    aggs: Mapping[str, AggregateOperation],
    *,
    deduct: bool = True,
    buckets: int = DEFAULT_BUCKETS,
    state_api: str = STATE_APIS[0],
    engine: str = "auto",
) -> DataFrame:
    """Aggregate ``df`` per key over sliding, tumbling or session windows of ``time``.

    ``deduct``: slide windows with the operations' ``deduct`` when they have one
    (False: always combine frames). ``buckets``: number of state groups of a streaming
    query — fixed for the life of its checkpoint. ``state_api``: one of ``STATE_APIS``
    (``transformWithStateInPandas`` by default, see :mod:`.state` for why).
    ``engine``: ``"auto"`` lets static tumbling windows of built-in operations run as
    Spark's native two-phase aggregation (see :mod:`.native`); ``"python"`` never does.
    """
    plan = Plan.build(key, time, window, aggs, deduct)
    missing = [c for c in plan.input_columns if c not in df.columns]
    if missing:
        raise AggregateError(f"columns not found: {missing}; the DataFrame has {df.columns}")
    if state_api not in STATE_APIS:
        raise AggregateError(f"state_api must be one of {STATE_APIS}, got {state_api!r}")
    if engine not in ("auto", "python"):
        raise AggregateError(f"engine must be 'auto' or 'python', got {engine!r}")
    if not isinstance(buckets, int) or buckets < 1:
        raise AggregateError(f"buckets must be a positive integer, got {buckets!r}")

    src_cols = list(plan.input_columns)
    heartbeat = HEARTBEAT if HEARTBEAT in df.columns else None
    key_fields = [df.schema[k] for k in plan.keys]
    partial_fields = [*key_fields, *(_ddl(n, t) for n, t in plan.partial_spark_fields())]
    out_schema = StructType([*key_fields, *(_ddl(n, t) for n, t in output_schema_fields(plan))])

    if not df.isStreaming:
        if heartbeat:
            df = df.filter(~F.coalesce(F.col(heartbeat), F.lit(False)))
        if engine == "auto":
            native = _native_tumbling(df, plan, out_schema)
            if native is not None:
                return native
        partials = df.select(*src_cols).mapInArrow(stage1_function(plan), StructType(partial_fields))
        return partials.repartition(*plan.keys).mapInArrow(_batch_stage2(plan), out_schema)

    wm_col, delay_ms = _event_time_watermark(df)
    for extra in (wm_col, heartbeat):
        if extra is not None and extra not in src_cols:
            src_cols.append(extra)
    # The watermark column keeps Spark's event-time marker, so the stateful operator
    # below sees that the query has a watermark (Spark forbids defining a second one).
    wm_field = StructField(WATERMARK, TimestampType(), True, {_DELAY_KEY: delay_ms})
    # stage 1 hands stage 2 one row per (input partition, bucket): the bucket's partial
    # table as Arrow IPC bytes (see .stage1)
    packed_schema = StructType(
        [StructField(BLOB, BinaryType(), True), StructField(BUCKET, LongType(), True), wm_field]
    )
    stage2_schema = pa.schema(
        [pa.field(f.name, to_arrow_type(f.dataType, timezone="UTC"), True) for f in partial_fields]
    )
    arrow_packed = pa.schema([(BLOB, pa.binary()), (BUCKET, pa.int64()), (WATERMARK, TS_TYPE)])
    stage1 = stage1_function(plan, wm_col, heartbeat, arrow_packed, bucket_column=BUCKET)
    bucket = F.pmod(F.xxhash64(*plan.keys), F.lit(buckets))
    partials = df.select(*src_cols).withColumn(BUCKET, bucket).mapInArrow(stage1, packed_schema)
    key_types = {f.name: to_arrow_type(f.dataType, timezone="UTC") for f in key_fields}
    grouped = partials.groupBy(BUCKET)
    if state_api == "applyInPandasWithState":  # the alternative, kept measurable
        return grouped.applyInPandasWithState(
            pandas_with_state_function(plan, stage2_schema, key_types),
            out_schema,
            STATE_DDL,
            "append",
            "EventTimeTimeout",
        )
    return grouped.transformWithStateInPandas(
        stateful_processor(plan, stage2_schema, key_types), out_schema, "append", "EventTime"
    )


def _native_tumbling(df: DataFrame, plan: Plan, out_schema: StructType) -> DataFrame | None:
    window = plan.window
    if plan.is_session or window.size_us != window.slide_us:
        return None
    results = [native_result(op) for op in plan.ops]
    if any(r is None for r in results):
        return None
    t = F.unix_micros(F.col(plan.time))
    start = (t - F.pmod(t, F.lit(window.slide_us))).alias("__start_us")
    agg = df.groupBy(*plan.keys, start).agg(
        *(r.cast(DataType.fromDDL(op.result_type)).alias(name)
          for r, op, name in zip(results, plan.ops, plan.names, strict=True))
    )  # fmt: skip
    out = agg.select(
        *plan.keys,
        F.timestamp_micros("__start_us").alias(WINDOW_START),
        F.timestamp_micros(F.col("__start_us") + window.size_us).alias(WINDOW_END),
        *plan.names,
    )
    return out.select(*(F.col(f.name).cast(f.dataType) for f in out_schema.fields))


def _event_time_watermark(df: DataFrame) -> tuple[str, int]:
    """The column ``withWatermark`` was called on, and its delay in ms."""
    for f in df.schema.fields:
        meta = f.metadata or {}
        if _DELAY_KEY in meta:
            return f.name, int(meta[_DELAY_KEY])
    raise AggregateError(
        "a streaming DataFrame needs an event-time watermark: call "
        'df.withWatermark("watermark", "0 seconds") (the source\'s watermark column) first'
    )


def _batch_stage2(plan: Plan):
    def run(batches):
        tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
        if not tables:
            return
        res = step(plan, None, pa.concat_tables(tables), None, None)
        if res is not None and res.output.num_rows:
            yield from res.output.to_batches(max_chunksize=1 << 16)

    return run
