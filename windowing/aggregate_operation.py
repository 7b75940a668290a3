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
    reads_values: bool = True
    """False for an operation that only needs to know which inputs are null (``count``): its
    input may then be of any type; the others read numbers."""
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
