"""Vectorized combination of frames into sliding windows, across many keys at once.

Input: unique (key code, frame) cells in any order, one accumulator batch per
operation. The cells are laid out on a grid of rows, one per key or per stretch of a key
(:class:`GridLayout`), with at least ``k - 1`` empty frames before and after the cells of
a row and row lengths multiple of ``k``:

* *dense* — one row per key code, all rows as long as the frames span: no sorting, a
  cell's place is arithmetic. Chosen when that grid is at most a few times the number of
  cells (many events per key and frame range, the usual case);
* *segments* — cells sorted by key and frame, cut wherever ``k`` or more frames lie
  between two cells (no window spans such a gap), each segment its own row: the grid
  stays proportional to the cells for sparse keys.

Then, per operation:

* with ``deduct``, for integer accumulators only: prefix combination P over each row,
  window = deduct(P[end], P[start - 1]) — Jet's "previous − trailing frame + leading
  frame", telescoped (exact on integers; on floats it cancels catastrophically);
* otherwise: van Herk/Gil-Werman — prefix and suffix combinations inside blocks of ``k``
  frames, window = combine(suffix[start], prefix[end]): three combines per window,
  amortized O(1) per slide like a two-stacks queue, but vectorized over all keys.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jetspark.windowing.aggregate_operation import Acc, AggregateOperation
from jetspark.windowing.kernels import block_scans, segmented_prefix, select, take

#: The dense layout is used while its grid has at most this many slots per cell.
DENSE_SLOTS_PER_CELL = 4


@dataclass
class Windows:
    """Result: per window the source cell (for the key), its last frame and op accumulators."""

    cell: np.ndarray
    last_frame: np.ndarray
    accs: list[Acc]


@dataclass
class GridLayout:
    """Where cells and windows sit on the grid.

    ``pos``: grid slot of each cell; ``total``: grid length (a multiple of ``k``);
    ``row_start``: first slot of every row; per window: ``cell`` (a cell of its key),
    ``last_frame``, ``first`` (slot of its first frame) and ``row`` (first slot of its row).
    """

    pos: np.ndarray
    total: int
    row_start: np.ndarray
    cell: np.ndarray
    last_frame: np.ndarray
    first: np.ndarray
    row: np.ndarray

    @staticmethod
    def dense(
        kc: np.ndarray, frame: np.ndarray, k: int, jlo: int | None, jhi: int | None, *, limit: bool = True
    ) -> GridLayout | None:
        """One row per key code; None when ``limit`` and the grid would have more than
        ``DENSE_SLOTS_PER_CELL`` slots per cell (counting a window's padding as cells)."""
        n = len(frame)
        keys = int(kc.max()) + 1
        fmin, fmax = int(frame.min()), int(frame.max())
        width = -(-(fmax - fmin + 1 + 2 * (k - 1)) // k) * k
        total = keys * width
        if limit and total > DENSE_SLOTS_PER_CELL * (n + 2 * k):
            return None
        pos = kc * width + (frame - fmin + k - 1)
        # windows j = fmin … fmax + k - 1 of every row; the first frame of j is at column j - fmin
        lo = 0 if jlo is None else max(0, jlo - fmin)
        hi = fmax + k - 1 - fmin if jhi is None else min(fmax + k - 1, jhi) - fmin
        row = np.arange(keys, dtype=np.int64) * width
        first = (row[:, None] + np.arange(lo, hi + 1, dtype=np.int64)[None, :]).ravel()
        occupied = np.zeros(total + 1, np.int32)
        occupied[pos + 1] = 1
        np.cumsum(occupied, out=occupied)
        first = first[occupied[first + k] > occupied[first]]  # non-empty windows only
        rep = np.zeros(keys, np.int64)
        rep[kc] = np.arange(n)  # any cell of the key stands for it
        row_of = first // width
        return GridLayout(
            pos, total, row, rep[row_of], fmin + first - row_of * width, first, row_of * width
        )

    @staticmethod
    def segments(kc: np.ndarray, frame: np.ndarray, k: int, jlo: int | None, jhi: int | None) -> GridLayout:
        """One row per run of a key's cells without a gap of ``k`` frames."""
        n = len(frame)
        order = np.lexsort((frame, kc))
        skc, sframe = kc[order], frame[order]
        new_seg = np.r_[True, (skc[1:] != skc[:-1]) | (np.diff(sframe) >= k)]
        starts = np.flatnonzero(new_seg)
        seg_id = np.cumsum(new_seg) - 1
        ends = np.r_[starts[1:] - 1, n - 1]
        a, b = sframe[starts], sframe[ends]
        length = (b - a + 1) + 2 * (k - 1)
        length = -(-length // k) * k
        grid0 = np.r_[0, np.cumsum(length)[:-1]]
        pos = np.empty(n, np.int64)
        pos[order] = grid0[seg_id] + (sframe - a[seg_id] + k - 1)

        nw = b - a + k  # windows j = a … b + k - 1 of each segment
        wseg = np.repeat(np.arange(len(starts)), nw)
        jrel = np.arange(int(nw.sum())) - np.repeat(np.cumsum(nw) - nw, nw)
        j = a[wseg] + jrel
        keep = np.ones(len(j), dtype=bool)
        if jlo is not None:
            keep &= j >= jlo
        if jhi is not None:
            keep &= j <= jhi
        if not keep.all():
            wseg, jrel, j = wseg[keep], jrel[keep], j[keep]
        row = grid0[wseg]
        return GridLayout(pos, int(length.sum()), grid0, order[starts[wseg]], j, row + jrel, row)


def sliding_windows(
    ops: tuple[AggregateOperation, ...],
    accs: list[Acc],
    kc: np.ndarray,
    frame: np.ndarray,
    k: int,
    jlo: int | None = None,
    jhi: int | None = None,
    use_deduct: bool = True,
    layout: str = "auto",
) -> Windows:
    """All non-empty windows ``j`` with ``jlo <= j <= jhi`` (None = unbounded).

    ``layout``: ``"auto"`` (dense when it fits, see :class:`GridLayout`), ``"dense"`` or
    ``"segments"`` (both give the same windows; forcing one is for tests)."""
    n = len(frame)
    cells = np.arange(n)
    if jlo is not None or jhi is not None:
        keep = np.ones(n, dtype=bool)
        if jlo is not None:
            keep &= frame >= jlo - k + 1
        if jhi is not None:
            keep &= frame <= jhi
        if not keep.all():
            cells = cells[keep]
            kc, frame = kc[keep], frame[keep]
            accs = [take(a, cells) for a in accs]
            n = len(frame)
    if n == 0:
        return Windows(np.zeros(0, np.int64), np.zeros(0, np.int64), [op.create(0) for op in ops])
    if k == 1:
        return Windows(cells, frame, accs)
    grid = None
    if layout != "segments":
        grid = GridLayout.dense(kc, frame, k, jlo, jhi, limit=layout == "auto")
    if grid is None:
        grid = GridLayout.segments(kc, frame, k, jlo, jhi)
    return Windows(cells[grid.cell], grid.last_frame, _window_accs(ops, accs, grid, k, use_deduct))


def _window_accs(
    ops: tuple[AggregateOperation, ...], accs: list[Acc], grid: GridLayout, k: int, use_deduct: bool
) -> list[Acc]:
    i = grid.first
    e = i + k - 1
    out = []
    seg_flags = None
    done: list[tuple[np.ufunc, np.ndarray, np.ndarray]] = []  # equal columns are scanned once
    for op, acc in zip(ops, accs, strict=True):
        if op.ufuncs is not None:
            deducts = use_deduct and op.has_deduct
            res = []
            for f, (uf, col) in enumerate(zip(op.ufuncs, acc, strict=True)):
                # same window values with or without deduct; e.g. count() and a sum's count
                # of a column without nulls hold the same numbers
                same = next((w for u, c, w in done if u is uf and _same_column(c, col)), None)
                if same is None:
                    identity = op.create(1)[f][0]
                    same = _ufunc_windows(uf, col, identity, grid.pos, grid.total, i, k, deducts)
                    done.append((uf, col, same))
                res.append(same)
            out.append(tuple(res))
            continue
        cells = op.create(grid.total)
        for g, col in zip(cells, acc, strict=True):
            g[grid.pos] = col
        if use_deduct and op.has_deduct and _exact(op):
            if seg_flags is None:
                seg_flags = np.zeros(grid.total, dtype=bool)
                seg_flags[grid.row_start] = True
            p = segmented_prefix(op, cells, seg_flags)
            lo = select(i > grid.row, take(p, np.maximum(i - 1, 0)), op.create(len(i)))
            out.append(op.deduct(take(p, e), lo))
        else:
            pre, suf = block_scans(op, cells, k)
            hi = take(pre, e)
            out.append(select(i % k == 0, hi, op.combine(take(suf, i), hi)))
    return out


def _same_column(a: np.ndarray, b: np.ndarray) -> bool:
    return a is b or (a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b)))


def _exact(op: AggregateOperation) -> bool:
    """Whether every accumulator field is an integer, so a deduct undoes a combine exactly.
    On floats it does not: after a large value, a running difference loses the small ones
    (and one infinity makes every later window NaN), where Spark's windows are exact."""
    return all(f.kind.startswith(("int", "uint", "bool")) for f in op.fields)


def _ufunc_windows(
    uf: np.ufunc,
    col: np.ndarray,
    identity,
    pos: np.ndarray,
    total: int,
    i: np.ndarray,
    k: int,
    deducts: bool,
) -> np.ndarray:
    """One accumulator column of an operation whose combine is ``uf`` field-wise: its
    value over the ``k`` grid cells starting at each ``i``.

    ``add`` of integers with deduct: differences of one running sum over the whole grid
    (cells between segments are empty, so no restart is needed; wrapping is exact modulo
    2**64). Otherwise, floats included, van Herk/Gil-Werman on blocks of ``k`` (segments
    start at multiples of ``k``): a float running sum over all keys would lose a key's
    small values after another key's large ones.
    """
    grid = np.full(total, identity, dtype=col.dtype)
    grid[pos] = col
    if deducts and uf is np.add and col.dtype.kind in "iub":
        run = np.empty(total + 1, dtype=col.dtype)
        run[0] = 0
        np.cumsum(grid, out=run[1:])
        return run[i + k] - run[i]
    nb = total // k
    pre = uf.accumulate(grid.reshape(nb, k), axis=1).ravel()
    # suffix scans inside blocks: prefix scans of the reversed grid (blocks stay aligned)
    suf = uf.accumulate(grid[::-1].reshape(nb, k), axis=1).ravel()[::-1]
    if uf not in (np.maximum, np.minimum, np.fmax, np.fmin):  # not idempotent: uf(x, x) != x
        # a window starting a block is the block's prefix alone: only such windows read a
        # block's first suffix, so that one becomes the identity (no modulo per window)
        suf[::k] = identity
    return uf(suf[i], pre[i + (k - 1)])
