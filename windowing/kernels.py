"""Vectorized kernels over accumulator batches (``Acc``): gather, group, scan.

What stage 1 and stage 2 do with an :class:`~.aggregate_operation.AggregateOperation`'s
accumulators, a handful of numpy calls per table, never one Python call per row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jetspark.windowing.aggregate_operation import Acc, AggregateOperation


def take(acc: Acc, idx: np.ndarray) -> Acc:
    return tuple(a[idx] for a in acc)


def select(mask: np.ndarray, a: Acc, b: Acc) -> Acc:
    """``a`` where mask else ``b``, element-wise."""
    return tuple(np.where(mask, x, y) for x, y in zip(a, b, strict=True))


def concat(parts: Sequence[Acc]) -> Acc:
    return tuple(np.concatenate(cols) for cols in zip(*parts, strict=True))


def accumulate_rows(
    op: AggregateOperation, groups: np.ndarray, ngroups: int, columns: Sequence[np.ndarray]
) -> Acc:
    """Fresh accumulators for ``ngroups`` groups holding the given rows (nulls skipped).

    ``columns`` are float64/int64 numpy arrays (NaN marks null in float columns) or
    masked arrays; rows where any input is null are not accumulated.
    """
    acc = op.create(ngroups)
    if columns:
        valid = np.ones(len(groups), dtype=bool)
        plain = []
        for c in columns:
            if isinstance(c, np.ma.MaskedArray):
                valid &= ~np.ma.getmaskarray(c)
                c = c.data
            elif c.dtype.kind == "f":
                valid &= ~np.isnan(c)
            plain.append(c)
        if not valid.all():
            groups = groups[valid]
            plain = [c[valid] for c in plain]
        return op.accumulate(acc, groups, *plain)
    return op.accumulate(acc, groups)


def reduce_groups(op: AggregateOperation, acc: Acc, groups: np.ndarray, ngroups: int) -> Acc:
    """Combine all accumulators with the same group id: result has ``ngroups`` entries."""
    if len(groups) == 0:
        return op.create(ngroups)
    if op.ufuncs is not None:
        order = np.argsort(groups, kind="stable")
        sg = groups[order]
        starts = np.flatnonzero(np.r_[True, sg[1:] != sg[:-1]])
        present = sg[starts]
        out = op.create(ngroups)
        res = []
        for uf, col, base in zip(op.ufuncs, acc, out, strict=True):
            base = base.copy()
            base[present] = uf.reduceat(col[order], starts)
            res.append(base)
        return tuple(res)
    # generic: pairwise tree reduction inside sorted segments, log2(max size) rounds
    order = np.argsort(groups, kind="stable")
    acc = take(acc, order)
    seg = groups[order]
    while len(seg) > 0:
        first = np.r_[True, seg[1:] != seg[:-1]]
        if first.all():
            break
        start_idx = np.maximum.accumulate(np.where(first, np.arange(len(seg)), 0))
        rank = np.arange(len(seg)) - start_idx
        left = np.flatnonzero(rank % 2 == 0)
        partner = left + 1
        has = np.zeros(len(left), dtype=bool)
        inb = partner < len(seg)
        has[inb] = seg[partner[inb]] == seg[left[inb]]
        partner = np.where(has, partner, left)
        merged = op.combine(take(acc, left), take(acc, partner))
        acc = select(has, merged, take(acc, left))
        seg = seg[left]
    out = op.create(ngroups)
    res = []
    for base, col in zip(out, acc, strict=True):
        base = base.copy()
        base[seg] = col
        res.append(base)
    return tuple(res)


def segmented_prefix(op: AggregateOperation, acc: Acc, seg_start: np.ndarray) -> Acc:
    """Inclusive prefix combination restarting at every True of ``seg_start``.

    ufunc-add operations use ``cumsum``; others a vectorized Hillis–Steele doubling scan
    (log2(longest segment) rounds of ``combine``).
    """
    n = len(seg_start)
    if n == 0:
        return acc
    if op.ufuncs is not None and all(u is np.add for u in op.ufuncs):
        starts = np.flatnonzero(seg_start)
        res = []
        for col in acc:
            c = np.cumsum(col)
            before = np.r_[np.zeros(1, dtype=c.dtype), c[:-1]][starts]
            res.append(c - np.repeat(before, np.diff(np.r_[starts, n])))
        return tuple(res)
    idx = np.arange(n)
    start_of = np.maximum.accumulate(np.where(seg_start, idx, 0))
    d = 1
    while d < n:
        src = idx - d
        ok = src >= start_of
        if not ok.any():
            break
        src_c = np.where(ok, src, idx)
        acc = select(ok, op.combine(take(acc, src_c), acc), acc)
        d *= 2
    return acc


def block_scans(op: AggregateOperation, acc: Acc, k: int) -> tuple[Acc, Acc]:
    """Prefix and suffix combinations inside consecutive blocks of ``k`` (len % k == 0)."""
    n = len(acc[0])
    nb = n // k
    if op.ufuncs is not None:
        pre, suf = [], []
        for uf, col in zip(op.ufuncs, acc, strict=True):
            m = col.reshape(nb, k)
            pre.append(uf.accumulate(m, axis=1).reshape(n))
            suf.append(uf.accumulate(m[:, ::-1], axis=1)[:, ::-1].reshape(n))
        return tuple(pre), tuple(suf)
    base = np.arange(nb) * k
    pre = tuple(c.copy() for c in acc)
    suf = tuple(c.copy() for c in acc)
    for c in range(1, k):
        i = base + c
        new = op.combine(take(pre, i - 1), take(acc, i))
        for p, v in zip(pre, new, strict=True):
            p[i] = v
        j = base + (k - 1 - c)
        new = op.combine(take(acc, j), take(suf, j + 1))
        for s, v in zip(suf, new, strict=True):
            s[j] = v
    return pre, suf
