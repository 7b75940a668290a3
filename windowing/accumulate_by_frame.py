"""Stage 1: local accumulation inside one input partition, before the shuffle.

Every event is folded once into the accumulator of its (key, frame) — or, for
sessions, of its local session — and then forgotten. Input rows arrive as Arrow record
batches (``mapInArrow``); they are reduced in chunks of ``chunk_rows`` so memory stays
bounded by one chunk plus the partial cells.

Streaming packs the partial table of each state bucket into one row (``__blob``: Arrow
IPC bytes): the stateful operator then receives a few rows per bucket instead of one
per (key, frame) cell, which spares Spark's per-row Arrow → pandas hand-over into the
state function (measured: most of stage 2's time before).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc

from jetspark.columns import TIMESTAMP_TYPE
from jetspark.windowing.combine_to_window import merge
from jetspark.windowing.kernels import accumulate_rows
from jetspark.windowing.keys import canonical_keys, key_codes, pair_groups
from jetspark.windowing.partials import dump_table, partial_table
from jetspark.windowing.plan import BUCKET, END, FRAME, START, Plan, time_to_us
from jetspark.windowing.policy import SlidingWindowPolicy
from jetspark.windowing.sessions import event_sessions


def accumulate_events(plan: Plan, table: pa.Table) -> pa.Table:
    """Raw event rows → partial table (one row per (key, frame) or local session); rows
    with a null event time belong to no window and are skipped."""
    time_col = table.column(plan.time)
    if time_col.null_count:
        table = table.filter(pc.is_valid(time_col))
        time_col = table.column(plan.time)
    t = time_to_us(time_col)
    kc = key_codes(table, plan.keys)
    key_table = canonical_keys(table.select(list(plan.keys)))
    if plan.is_session:
        order, gid, heads, start, end = event_sessions(kc, t, plan.window.timeout_us)
        accs = [
            accumulate_rows(op, gid, len(heads), [c[order] for c in plan.input_arrays(table, t, op)])
            for op in plan.ops
        ]
        return partial_table(plan, key_table.take(order[heads]), {START: start, END: end}, accs)
    frame = SlidingWindowPolicy.of(plan.window).frame_of(t)
    gid, ng, first = pair_groups(kc, frame)
    accs = [accumulate_rows(op, gid, ng, plan.input_arrays(table, t, op)) for op in plan.ops]
    return partial_table(plan, key_table.take(first), {FRAME: frame[first]}, accs)


def merge_partials(plan: Plan, table: pa.Table) -> pa.Table:
    """Combine partial rows of the same (key, frame) / overlapping sessions."""
    cells = merge(plan, table)
    return partial_table(plan, cells.keys, cells.pos, cells.accs)


CARRIED_WM = "__wm"  # the input rows' event-time watermark, carried to stage 2 (not the sources' column)
CARRIED_WM_US = "__wm_us"  # the same in epoch µs (stage 2's pandas timestamps are in the session's zone)
# What the packed rows' ``__wm`` holds: the latest time pandas can hold (stage 2 receives the
# rows as pandas frames), behind no watermark that pandas could represent either.
# ``__wm`` keeps Spark's event-time marker (the stateful operator must see the query's
# watermark), so Spark's stateful operator drops every input row whose ``__wm`` is at or behind
# the previous micro-batch's watermark; with the rows' W there, a W that stalls for two
# micro-batches (a slow or skewed partition holding it) dropped whole micro-batches of rows
# that are not late. Stage 2 reads the carried W from ``__wm_us`` and decides lateness itself
# (docs/design.md, "Windowing state (streaming)"). Spark's watermark is measured upstream, at
# the source's ``withWatermark``, never from these values.
NEVER_LATE = datetime(2262, 4, 11, 23, 47, 16, 854775, tzinfo=UTC)  # pandas' latest, in µs
BLOB = "__blob"


def _packed_rows(
    table: pa.Table, buckets: pa.ChunkedArray, wm, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """One row per bucket: (blob of its partial rows, bucket, watermark)."""
    for b in pc.unique(buckets).to_pylist():
        blob = dump_table(table.filter(pc.equal(buckets, b)), compress=False)  # the shuffle compresses
        row = {BLOB: blob, BUCKET: b, CARRIED_WM: NEVER_LATE, CARRIED_WM_US: _epoch_us(wm)}
        yield pa.RecordBatch.from_pylist([row], schema=schema)


def _epoch_us(t) -> int:
    """A watermark (a datetime, naive meaning UTC) in epoch microseconds."""
    return pa.scalar(t, TIMESTAMP_TYPE).cast(pa.int64()).as_py()


def stage1_function(
    plan: Plan,
    watermark_column: str | None = None,
    heartbeat_column: str | None = None,
    output_schema: pa.Schema | None = None,
    chunk_rows: int = 1 << 20,
    bucket_column: str | None = None,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of stage 1.

    Streaming: every output row also carries ``__wm``, the greatest value of the
    input's event-time watermark column in this partition (heartbeat rows included), and
    a partition with no data but a watermark emits one *carrier* row (null key and
    position), so that a ``withWatermark("__wm", …)`` downstream sees exactly the
    watermark of the input. Heartbeat rows are dropped here.

    ``bucket_column`` (streaming): the input carries each row's state bucket; the output
    is then (``__blob``, bucket, ``__wm``) rows, one per bucket (see the module docstring),
    and a carrier row has a null blob.
    """

    # the bucket is a function of the key: an extra key column keeps it on partial rows
    local = plan if bucket_column is None else replace(plan, keys=(*plan.keys, bucket_column))

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        partials: list[pa.Table] = []
        buf: list[pa.RecordBatch] = []
        rows = 0
        wm = None

        def flush() -> None:
            nonlocal buf, rows
            if rows:
                partials.append(accumulate_events(local, pa.Table.from_batches(buf)))
            buf, rows = [], 0

        for batch in batches:
            if batch.num_rows == 0:
                continue
            if watermark_column is not None:
                m = pc.max(batch.column(watermark_column)).as_py()
                if m is not None and (wm is None or m > wm):
                    wm = m
            if heartbeat_column is not None:
                hb = pc.fill_null(batch.column(heartbeat_column), False)
                batch = batch.filter(pc.invert(hb))
                if batch.num_rows == 0:
                    continue
            buf.append(batch)
            rows += batch.num_rows
            if rows >= chunk_rows:
                flush()
                if len(partials) > 1:
                    partials = [merge_partials(local, pa.concat_tables(partials))]
        flush()
        out = None
        if partials:
            out = partials[0] if len(partials) == 1 else merge_partials(local, pa.concat_tables(partials))
        if watermark_column is None:
            if out is not None:
                yield from out.to_batches(max_chunksize=1 << 16)
            return
        if wm is None:
            return
        if out is None:
            carrier = {CARRIED_WM: wm}
            if CARRIED_WM_US in output_schema.names:  # packed for the stateful stage
                carrier = {CARRIED_WM: NEVER_LATE, CARRIED_WM_US: _epoch_us(wm)}
            yield pa.RecordBatch.from_pylist([carrier], schema=output_schema)
            return
        if bucket_column is not None:
            buckets = out.column(bucket_column)
            yield from _packed_rows(out.drop_columns([bucket_column]), buckets, wm, output_schema)
            return
        out = out.append_column(CARRIED_WM, pa.array([wm] * out.num_rows, TIMESTAMP_TYPE))
        if output_schema is not None:
            out = out.cast(output_schema)
        yield from out.to_batches(max_chunksize=1 << 16)

    return run
