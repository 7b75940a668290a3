"""Stage 2: global combining of partial frames / sessions, keyed, vectorized over many keys.

:func:`step` is the pure heart of the streaming operator and of the batch path. It takes
the retained state (a partial table), the new partial rows and two watermarks:

* ``emitted_us``: windows ending at or before it were emitted earlier (None: nothing yet),
* ``watermark_us``: windows ending at or before it are emitted now (None: everything —
  the static-DataFrame case),

and returns the new state (only frames / sessions some open window still needs), the
emitted windows and the end of the next window to close (for the event-time timer).

With early results (``plan.early``) the output has a boolean ``final`` column: the closed
windows are final rows, and when the caller says the bucket's period is due the open
windows that contain a cell changed since their last provisional emission follow as
provisional rows (docs/design.md, "Early results").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jetspark.windowing.arrow_numpy import take_rows, to_numpy
from jetspark.windowing.kernels import reduce_groups, take
from jetspark.windowing.keys import key_codes, pair_groups
from jetspark.windowing.plan import CHANGED, END, FRAME, START, Plan, us_to_ts
from jetspark.windowing.policy import SlidingWindowPolicy
from jetspark.windowing.sessions import merge_sessions
from jetspark.windowing.sliding_scan import sliding_windows

WINDOW_START = "window_start"
WINDOW_END = "window_end"
#: Early results only: true on the one final row of a window, false on its provisional rows.
FINAL = "final"


@dataclass
class StepResult:
    state: pa.Table | None
    output: pa.Table
    next_close_us: int | None  # smallest watermark at which another window closes
    provisional_rows: int = 0  # early results: how many of the output rows are provisional
    emitted_us: int | None = None  # windows ending at or before it are emitted (streaming)


def output_schema_fields(plan: Plan) -> list[tuple[str, str]]:
    """(name, Spark DDL) of the non-key output columns."""
    fields = [(WINDOW_START, "timestamp"), (WINDOW_END, "timestamp")] + [
        (name, op.result_type) for name, op in zip(plan.names, plan.ops, strict=True)
    ]
    return [*fields, (FINAL, "boolean")] if plan.early else fields


def _concat(tables: list[pa.Table | None]) -> pa.Table | None:
    tables = [t for t in tables if t is not None and t.num_rows]
    if not tables:
        return None
    if len(tables) == 1:
        return tables[0]
    return pa.concat_tables(tables, promote_options="default")


def _output(
    plan: Plan, keys: pa.Table, start: np.ndarray, end: np.ndarray, accs, *, final: bool = True
) -> pa.Table:
    cols = {name: keys.column(name) for name in plan.keys}
    cols[WINDOW_START] = us_to_ts(start)
    cols[WINDOW_END] = us_to_ts(end)
    cols.update(plan.results_to_columns(accs))
    if plan.early:
        cols[FINAL] = pa.array(np.full(len(start), final), pa.bool_())
    return pa.table(cols)


def empty_output(plan: Plan, key_types: dict[str, pa.DataType]) -> pa.Table:
    keys = pa.table({k: pa.array([], key_types[k]) for k in plan.keys})
    z = np.zeros(0, np.int64)
    return _output(plan, keys, z, z, [op.create(0) for op in plan.ops])


@dataclass
class Cells:
    """Merged partial rows: unique (key, frame) cells (in no particular order) or disjoint
    sessions (sorted by key)."""

    keys: pa.Table
    kc: np.ndarray
    pos: dict[str, np.ndarray]
    accs: list
    changed: np.ndarray | None = None  # early results: changed since the last provisional emission

    def take(self, idx: np.ndarray) -> Cells:
        return Cells(
            self.keys.take(idx),
            self.kc[idx],
            {k: v[idx] for k, v in self.pos.items()},
            [take(a, idx) for a in self.accs],
            None if self.changed is None else self.changed[idx],
        )

    def table(self, plan: Plan) -> pa.Table:
        flags = {} if self.changed is None else {CHANGED: pa.array(self.changed, pa.bool_())}
        return pa.table(
            {
                **{k: self.keys.column(k) for k in plan.keys},
                **{k: pa.array(v, pa.int64()) for k, v in self.pos.items()},
                **plan.accs_to_columns(self.accs),
                **flags,
            }
        )


def merge(plan: Plan, table: pa.Table) -> Cells:
    """Combine rows of the same (key, frame), or overlapping sessions of a key."""
    kc = key_codes(table, plan.keys)
    accs = plan.accs_from_table(table)
    keys = table.select(list(plan.keys))
    changed = _changed_flags(table) if plan.early else None
    if plan.is_session:
        start = table.column(START).to_numpy()
        end = table.column(END).to_numpy()
        src, ckc, s, e, merged, flags = merge_sessions(plan.ops, accs, kc, start, end, changed)
        return Cells(keys.take(src), ckc, {START: s, END: e}, merged, flags)
    frame = to_numpy(table.column(FRAME))
    gid, ng, first = pair_groups(kc, frame)
    if ng == len(gid):  # already one row per (key, frame): e.g. Spark aggregated them (static queries)
        return Cells(keys, kc, {FRAME: frame}, accs, changed)
    accs = [reduce_groups(op, a, gid, ng) for op, a in zip(plan.ops, accs, strict=True)]
    flags = None if changed is None else np.bincount(gid, weights=changed, minlength=ng) > 0
    return Cells(take_rows(keys, first), kc[first], {FRAME: frame[first]}, accs, flags)


def _changed_flags(table: pa.Table) -> np.ndarray:
    """Per partial row: changed since its windows' last provisional emission. New partials
    (stage 1's, without the state-only column: null after concatenation) are changes."""
    if CHANGED not in table.column_names:
        return np.ones(table.num_rows, dtype=bool)
    return pc.fill_null(table.column(CHANGED), True).to_numpy(zero_copy_only=False).astype(bool)


def emit(plan: Plan, cells: Cells, emitted_us: int | None, watermark_us: int | None) -> pa.Table:
    """Windows of ``cells`` closed at ``watermark_us`` but not yet at ``emitted_us``.

    A sliding window [start, end) is closed when watermark >= end (as in Spark); a session
    only when watermark > end — an on-time event at t == end still extends it (Jet:
    intervals [t, t + timeout] that touch merge). None = unbounded.
    """
    if plan.is_session:
        e = cells.pos[END]
        ok = np.ones(len(e), dtype=bool)
        if watermark_us is not None:
            ok &= e < watermark_us
        if emitted_us is not None:
            ok &= e >= emitted_us
        c = cells if ok.all() else cells.take(np.flatnonzero(ok))
        return _output(plan, c.keys, c.pos[START], c.pos[END], c.accs)
    policy = SlidingWindowPolicy.of(plan.window)
    wins = sliding_windows(
        plan.ops,
        cells.accs,
        cells.kc,
        cells.pos[FRAME],
        policy.k,
        policy.first_open_window(emitted_us),
        policy.last_closed_window(watermark_us),
        plan.use_deduct,
    )
    return _output(
        plan,
        take_rows(cells.keys, wins.cell),
        policy.window_start(wins.last_frame),
        policy.window_end(wins.last_frame),
        wins.accs,
    )


def evict(plan: Plan, cells: Cells, watermark_us: int) -> tuple[Cells, int | None]:
    """Drop what no open window needs; also return the watermark at which the next window
    closes (for the event-time timer)."""
    if plan.is_session:
        keep = np.flatnonzero(cells.pos[END] >= watermark_us)
        kept = cells.take(keep)
        e = kept.pos[END]
        return kept, (int(e.min()) + 1 if len(e) else None)
    policy = SlidingWindowPolicy.of(plan.window)
    keep = np.flatnonzero(cells.pos[FRAME] >= policy.first_needed_frame(watermark_us))
    kept = cells.take(keep)
    return kept, policy.next_window_end(kept.pos[FRAME], watermark_us)


def provisional(plan: Plan, cells: Cells, watermark_us: int) -> pa.Table:
    """Early results: the windows of ``cells`` still open at ``watermark_us`` that contain a
    changed cell (a changed session), as provisional rows (``final`` false).

    Only keys with a changed cell are combined, and only over the windows their changed
    frames reach, so a key with no new events costs nothing here."""
    assert cells.changed is not None
    if plan.is_session:  # open while watermark <= end (see emit)
        c = cells.take(np.flatnonzero(cells.changed & (cells.pos[END] >= watermark_us)))
        return _output(plan, c.keys, c.pos[START], c.pos[END], c.accs, final=False)
    policy = SlidingWindowPolicy.of(plan.window)
    if not cells.changed.any():
        return _output(plan, cells.keys.slice(0, 0), *([np.zeros(0, np.int64)] * 2),
                       [op.create(0) for op in plan.ops], final=False)
    sub = cells.take(np.flatnonzero(np.isin(cells.kc, np.unique(cells.kc[cells.changed]))))
    frame, kc = sub.pos[FRAME], sub.kc
    hot = np.flatnonzero(sub.changed)
    jlo = max(policy.first_open_window(watermark_us), int(frame[hot].min()))
    jhi = int(frame[hot].max()) + policy.k - 1
    wins = sliding_windows(plan.ops, sub.accs, kc, frame, policy.k, jlo, jhi, plan.use_deduct)
    # a window j of key c contains a changed cell when one lies in frames j - k + 1 … j of c
    fmin = int(frame.min())
    span = int(frame.max()) - fmin + policy.k + 1
    marks = np.sort(kc[hot] * span + (frame[hot] - fmin))
    wkc, j = kc[wins.cell], wins.last_frame
    lo = np.searchsorted(marks, wkc * span + np.maximum(j - policy.k + 1 - fmin, 0), "left")
    hi = np.searchsorted(marks, wkc * span + (j - fmin), "right")
    ok = np.flatnonzero(hi > lo)
    return _output(plan, sub.keys.take(wins.cell[ok]), policy.window_start(j[ok]), policy.window_end(j[ok]),
                   [take(a, ok) for a in wins.accs], final=False)


def step(
    plan: Plan,
    state: pa.Table | None,
    partials: pa.Table | None,
    emitted_us: int | None,
    watermark_us: int | None,
    *,
    early_due: bool = False,
    carried_us: int | None = None,
) -> StepResult | None:
    """One stage-2 step; None when there is neither state nor input.

    Streaming (``watermark_us`` given, Spark's watermark): first the windows of the
    *retained state* ending in (emitted_us, watermark_us] are emitted, then the new partials
    are merged — so late contributions never touch a window at or before the watermark
    (Spark drops them the same way) — and what no open window needs is evicted.
    ``carried_us``: the watermark the new partials' own micro-batch reached (the sources'
    W, which Spark's watermark becomes only in the next micro-batch): windows ending up to
    it are emitted now, after the merge, with the new partials in them — the rows they
    would have at the next micro-batch, whose new partials Spark's watermark then excludes.
    Static (``watermark_us`` None): everything is merged and every window emitted.

    Early results (``plan.early``): with ``early_due`` (the bucket's period has elapsed)
    the open windows changed since their last provisional emission follow the final rows
    as provisional rows, and the retained cells are marked unchanged; without it the
    changes are kept in the state for a later step.
    """
    table = _concat([state, partials])
    if table is None:
        return None
    if watermark_us is None:
        return StepResult(None, emit(plan, merge(plan, table), None, None), None)
    sealed = watermark_us if emitted_us is None else max(emitted_us, watermark_us)
    if state is not None and state.num_rows and sealed > (emitted_us if emitted_us is not None else -1):
        out = emit(plan, merge(plan, state), emitted_us, sealed)
    else:
        out = empty_output(plan, {k: table.schema.field(k).type for k in plan.keys})
    merged = merge(plan, table)
    reached = sealed
    if carried_us is not None and partials is not None and carried_us > sealed:
        reached = carried_us
        closed = emit(plan, merged, sealed, reached)
        if closed.num_rows:
            out = pa.concat_tables([out, closed.cast(out.schema)]) if out.num_rows else closed
    kept, nxt = evict(plan, merged, reached)
    early = 0
    if plan.early and early_due and kept.changed is not None and kept.changed.any():
        rows = provisional(plan, kept, reached)
        early = rows.num_rows
        out = pa.concat_tables([out, rows.cast(out.schema)]) if out.num_rows else rows.cast(out.schema)
        kept.changed = np.zeros(len(kept.changed), dtype=bool)
    return StepResult(kept.table(plan), out, nxt, early, reached)
