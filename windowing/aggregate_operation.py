"""Aggregate operations: create → accumulate → combine → (deduct) → finish, vectorized.

An :class:`AggregateOperation` works on *columns of accumulators*: an accumulator
batch ``Acc`` is a tuple with one numpy array per state field (see ``fields``), all of
the same length ``n``; element ``i`` of every array together is accumulator ``i``.
Every method works on whole batches, so a frame table of a million (key, frame) cells
is combined with a handful of numpy calls, never one Python call per row.

Laws (checked with Hypothesis for every built-in, see tests/property):

* identity:     ``combine(create(n), a) == a``
* associative:  ``combine(combine(a, b), c) == combine(a, combine(b, c))``
* commutative:  ``combine(a, b) == combine(b, a)``
* accumulate is a fold: accumulating rows R1 + R2 into fresh accumulators equals
  ``combine(accumulate(create, R1), accumulate(create, R2))``
* deduct (optional) undoes combine: ``deduct(combine(a, b), b) == a``

("==" on floating-point state means up to rounding.)

A user-defined operation takes a few lines; e.g. the sum of squares of a column::

    class SumOfSquares(AggregateOperation):
        fields = (Field("s", "float64"),)
        result_type = "double"

        def accumulate(self, acc, groups, x):
            return (acc[0] + np.bincount(groups, x * x, minlength=len(acc[0])),)

        def combine(self, a, b):
            return (a[0] + b[0],)

        def deduct(self, a, b):          # optional
            return (a[0] - b[0],)

        def finish(self, acc):
            return acc[0]

    aggs = {"ss": SumOfSquares("speed")}

Rows where any input column is null are skipped by that operation (as in SQL).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from jetspark.errors import JetsparkError

Acc = tuple[np.ndarray, ...]

#: Pseudo input column name: the event time (int64 microseconds since the epoch).
EVENT_TIME = "$time"

_KINDS = {
    "int64": (pa.int64(), "bigint"),
    "float64": (pa.float64(), "double"),
    "list<int64>": (pa.list_(pa.int64()), "array<bigint>"),
    "list<float64>": (pa.list_(pa.float64()), "array<double>"),
}


class AggregateError(JetsparkError, ValueError):
    """An aggregate operation is malformed or used wrongly."""


@dataclass(frozen=True)
class Field:
    """One column of an accumulator: a name and a kind (int64, float64, list<…>).

    ``shared`` (optional) names what the field holds independently of the operation —
    ``"count"`` = the number of rows whose inputs are all non-null. Operations with the
    same inputs then store such a field once in partial tables and state.
    """

    name: str
    kind: str
    shared: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise AggregateError(f"field {self.name!r}: kind must be one of {sorted(_KINDS)}")

    @property
    def arrow_type(self) -> pa.DataType:
        return _KINDS[self.kind][0]

    @property
    def spark_type(self) -> str:
        return _KINDS[self.kind][1]

    @property
    def is_list(self) -> bool:
        return self.kind.startswith("list")

    @property
    def numpy_dtype(self) -> np.dtype:
        if self.is_list:
            return np.dtype(object)
        return np.dtype(self.kind)

    def empty(self, n: int) -> np.ndarray:
        """``n`` zero values (empty arrays for list kinds)."""
        if not self.is_list:
            return np.zeros(n, dtype=self.kind)
        out = np.empty(n, dtype=object)
        sub = np.dtype(self.kind[5:-1])
        for i in range(n):
            out[i] = np.empty(0, dtype=sub)
        return out


class AggregateOperation(ABC):
    """Base class of aggregate operations; see the module docstring for the laws.

    Subclasses set ``fields`` and ``result_type`` (Spark DDL) and implement
    ``accumulate``, ``combine`` and ``finish``; ``deduct`` is optional. Setting
    ``ufuncs`` (one numpy ufunc per field, when ``combine`` is that ufunc field-wise)
    unlocks faster scans; it is a promise, not checked.
    """

    fields: tuple[Field, ...] = ()
    result_type: str = "double"
    ufuncs: tuple[np.ufunc, ...] | None = None

    def __init__(self, *inputs: str) -> None:
        self.inputs: tuple[str, ...] = tuple(inputs)

    # --- the five functions -------------------------------------------------------------
    def create(self, n: int) -> Acc:
        """``n`` empty accumulators (the identity of ``combine``)."""
        return tuple(f.empty(n) for f in self.fields)

    @abstractmethod
    def accumulate(self, acc: Acc, groups: np.ndarray, *columns: np.ndarray) -> Acc:
        """Fold row ``i`` of ``columns`` into accumulator ``groups[i]``; returns new acc."""

    @abstractmethod
    def combine(self, a: Acc, b: Acc) -> Acc:
        """Element-wise combination of two accumulator batches of equal length."""

    def deduct(self, a: Acc, b: Acc) -> Acc:
        """Element-wise inverse of combine: ``deduct(combine(a, b), b) == a``. Optional:
        operations without it are combined with the two-stacks scheme instead."""
        raise AggregateError(f"{self!r} has no deduct")

    @abstractmethod
    def finish(self, acc: Acc) -> np.ndarray | pa.Array:
        """The result per accumulator (a numpy array, or an Arrow array to express nulls)."""

    # --- derived ------------------------------------------------------------------------
    @property
    def has_deduct(self) -> bool:
        return type(self).deduct is not AggregateOperation.deduct

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(map(repr, self.inputs))})"


# ------------------------------------------------------------------------------------------
# Generic batch helpers (work for any operation)
# ------------------------------------------------------------------------------------------


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


def to_arrow(field: Field, col: np.ndarray) -> pa.Array:
    """An accumulator column as an Arrow array (lists become ListArray)."""
    if not field.is_list:
        return pa.array(col, type=field.arrow_type)
    lengths = np.fromiter((len(x) for x in col), dtype=np.int32, count=len(col))
    offsets = np.zeros(len(col) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    sub = field.arrow_type.value_type.to_pandas_dtype()
    flat = np.concatenate(list(col)).astype(sub) if len(col) else np.empty(0, sub)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat))


def from_arrow(field: Field, arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Inverse of :func:`to_arrow`."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if not field.is_list:
        return arr.to_numpy(zero_copy_only=False).astype(field.numpy_dtype, copy=False)
    offsets = arr.offsets.to_numpy()
    flat = arr.values.to_numpy(zero_copy_only=False)
    flat = flat[offsets[0] : offsets[-1]]
    parts = np.split(flat, offsets[1:-1] - offsets[0]) if len(arr) else []
    out = np.empty(len(parts), dtype=object)
    for i, p in enumerate(parts):
        out[i] = p
    return out
