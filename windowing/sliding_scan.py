"""Vectorized combination of frames into sliding windows, across many keys at once.

Input: unique (key code, frame) cells sorted by key then frame, one accumulator batch
per operation. The cells of a key are cut into *segments* wherever ``k`` or more frames
lie between two cells (no window spans such a gap). Each segment is laid out on a dense
grid (``k - 1`` empty frames before and after, length rounded up to a multiple of
``k``). Then, per operation:

* with ``deduct``: prefix combination P over each segment, window = deduct(P[end],
  P[start - 1]) — Jet's "previous − trailing frame + leading frame", telescoped;
* without: van Herk/Gil-Werman — prefix and suffix combinations inside blocks of ``k``
  frames, window = combine(suffix[start], prefix[end]): three combines per window,
  amortized O(1) per slide like a two-stacks queue, but vectorized over all keys.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jetspark.windowing.aggregate_operation import Acc, AggregateOperation
from jetspark.windowing.kernels import block_scans, segmented_prefix, select, take


@dataclass
class Windows:
    """Result: per window the source cell (for the key), its last frame and op accumulators."""

    cell: np.ndarray
    last_frame: np.ndarray
    accs: list[Acc]


def sliding_windows(
    ops: tuple[AggregateOperation, ...],
    accs: list[Acc],
    kc: np.ndarray,
    frame: np.ndarray,
    k: int,
    jlo: int | None = None,
    jhi: int | None = None,
    use_deduct: bool = True,
) -> Windows:
    """All non-empty windows ``j`` with ``jlo <= j <= jhi`` (None = unbounded)."""
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

    new_seg = np.r_[True, (kc[1:] != kc[:-1]) | (np.diff(frame) >= k)]
    starts = np.flatnonzero(new_seg)
    seg_id = np.cumsum(new_seg) - 1
    ends = np.r_[starts[1:] - 1, n - 1]
    a, b = frame[starts], frame[ends]
    length = (b - a + 1) + 2 * (k - 1)
    length = -(-length // k) * k
    grid0 = np.r_[0, np.cumsum(length)[:-1]]
    total = int(length.sum())
    pos = grid0[seg_id] + (frame - a[seg_id] + k - 1)

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
    i = grid0[wseg] + jrel  # grid position of the window's first frame
    e = i + k - 1

    out = []
    seg_flags = None
    done: dict[tuple[int, str], np.ndarray] = {}  # shared columns are scanned once
    for op, acc in zip(ops, accs, strict=True):
        if op.ufuncs is not None:
            deducts = use_deduct and op.has_deduct
            res = []
            for f, (uf, col) in enumerate(zip(op.ufuncs, acc, strict=True)):
                key = (id(col), uf.__name__)  # same window values with or without deduct
                if key not in done:
                    identity = op.create(1)[f][0]
                    done[key] = _ufunc_windows(uf, col, identity, pos, total, i, k, deducts)
                res.append(done[key])
            out.append(tuple(res))
            continue
        grid = op.create(total)
        for g, col in zip(grid, acc, strict=True):
            g[pos] = col
        if use_deduct and op.has_deduct:
            if seg_flags is None:
                seg_flags = np.zeros(total, dtype=bool)
                seg_flags[grid0] = True
            p = segmented_prefix(op, grid, seg_flags)
            has_lo = i > grid0[wseg]
            lo = select(has_lo, take(p, np.maximum(i - 1, 0)), op.create(len(i)))
            out.append(op.deduct(take(p, e), lo))
        else:
            pre, suf = block_scans(op, grid, k)
            hi = take(pre, e)
            aligned = i % k == 0
            out.append(select(aligned, hi, op.combine(take(suf, i), hi)))
    return Windows(cells[starts[wseg]], j, out)


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

    ``add`` with deduct: differences of one running sum over the whole grid (cells
    between segments are empty, so no restart is needed). Otherwise van Herk/Gil-Werman
    on blocks of ``k`` (segments start at multiples of ``k``).
    """
    grid = np.full(total, identity, dtype=col.dtype)
    grid[pos] = col
    if deducts and uf is np.add:
        run = np.empty(total + 1, dtype=col.dtype)
        run[0] = 0
        np.cumsum(grid, out=run[1:])
        return run[i + k] - run[i]
    nb = total // k
    pre = uf.accumulate(grid.reshape(nb, k), axis=1).ravel()
    # suffix scans inside blocks: prefix scans of the reversed grid (blocks stay aligned)
    suf = uf.accumulate(grid[::-1].reshape(nb, k), axis=1).ravel()[::-1]
    hi = pre[i + (k - 1)]
    lo = suf[i]
    if uf in (np.maximum, np.minimum, np.fmax, np.fmin):  # idempotent: uf(x, x) == x
        return uf(lo, hi)
    return np.where(i % k == 0, hi, uf(lo, hi))
