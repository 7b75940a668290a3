"""Built-in aggregate operations (all vectorized; see :mod:`.aggregate_operation` for the laws).

Under Spark's names and argument order (``pyspark.sql.functions``): ``count()`` /
``count(col)``, ``sum(col)``, ``avg(col)`` = ``mean(col)``, ``min(col)``, ``max(col)``,
``var_samp(col)`` = ``variance(col)``, ``var_pop(col)``, ``stddev_samp(col)`` = ``stddev(col)``,
``stddev_pop(col)``, ``regr_slope(y, x)``, ``regr_intercept(y, x)``; under Jet's name, in Jet's
order: ``linear_trend(x, y)`` (``AggregateOperations.linearTrend(getX, getY)``, the same slope
as ``regr_slope(y, x)``); jetspark's own: ``collect_sorted(col)`` (values in event-time order,
order-sensitive). ``sum_``, ``min_`` and ``max_`` are the same as ``sum``, ``min`` and ``max``
for code that keeps Python's built-ins (``from jetspark.windowing.ops import sum_``).
Deprecated: ``linear_slope(x, y)`` (use ``regr_slope(y, x)`` or ``linear_trend(x, y)``) and
``linear_intercept(x, y)`` (use ``regr_intercept(y, x)``).

Every column argument is a column name or a ``pyspark.sql.Column`` (``F.col("x")``,
``F.col("a") * 2``): :func:`~jetspark.windowing.window_aggregate` computes an expression as a
hidden column of the input before windowing, so the operations stay vectorized.
Numeric and boolean inputs are read as float64 (NaN = null; ``count(col)`` reads only which
values are null, of any type); results follow Spark (``count`` → bigint, empty or
all-null input → null).
"""

from __future__ import annotations

import warnings

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column

from jetspark.columns import from_numpy as _from_numpy
from jetspark.windowing.aggregate_operation import EVENT_TIME, Acc, AggregateError, AggregateOperation, Field

ColumnOrName = Column | str
"""A column argument: a column name, or a ``pyspark.sql.Column`` expression."""


def _null_where(values: np.ndarray, null: np.ndarray) -> pa.Array:
    return _from_numpy(values, pa.float64(), null)


class Count(AggregateOperation):
    """Number of rows (``count()``) or of non-null values (``count("c")``)."""

    fields = (Field("n", "int64", shared="count"),)
    result_type = "bigint"
    ufuncs = (np.add,)
    reads_values = False

    def accumulate(self, acc: Acc, groups: np.ndarray, *columns: np.ndarray) -> Acc:
        return (acc[0] + np.bincount(groups, minlength=len(acc[0])),)

    def combine(self, a: Acc, b: Acc) -> Acc:
        return (a[0] + b[0],)

    def deduct(self, a: Acc, b: Acc) -> Acc:
        return (a[0] - b[0],)

    def finish(self, acc: Acc) -> np.ndarray:
        return acc[0]


class Sum(AggregateOperation):
    """Sum of a numeric column (null when no value)."""

    fields = (Field("n", "int64", shared="count"), Field("s", "float64"))
    ufuncs = (np.add, np.add)

    def accumulate(self, acc: Acc, groups: np.ndarray, x: np.ndarray) -> Acc:
        m = len(acc[0])
        return (
            acc[0] + np.bincount(groups, minlength=m),
            acc[1] + np.bincount(groups, x, minlength=m),
        )

    def combine(self, a: Acc, b: Acc) -> Acc:
        return (a[0] + b[0], a[1] + b[1])

    def deduct(self, a: Acc, b: Acc) -> Acc:
        return (a[0] - b[0], a[1] - b[1])

    def finish(self, acc: Acc) -> pa.Array:
        return _null_where(acc[1], acc[0] == 0)


class Mean(Sum):
    """Arithmetic mean of a numeric column."""

    def finish(self, acc: Acc) -> pa.Array:
        n = acc[0]
        return _null_where(acc[1] / np.where(n == 0, 1, n), n == 0)


class Min(AggregateOperation):
    """Smallest value of a numeric column."""

    fields = (Field("n", "int64", shared="count"), Field("m", "float64"))
    ufuncs = (np.add, np.minimum)
    _identity = np.inf

    def create(self, n: int) -> Acc:
        return (np.zeros(n, np.int64), np.full(n, self._identity))

    def accumulate(self, acc: Acc, groups: np.ndarray, x: np.ndarray) -> Acc:
        m = acc[1].copy()
        self.ufuncs[1].at(m, groups, x)
        return (acc[0] + np.bincount(groups, minlength=len(m)), m)

    def combine(self, a: Acc, b: Acc) -> Acc:
        return (a[0] + b[0], self.ufuncs[1](a[1], b[1]))

    def finish(self, acc: Acc) -> pa.Array:
        return _null_where(acc[1], acc[0] == 0)


class Max(Min):
    """Greatest value of a numeric column."""

    ufuncs = (np.add, np.maximum)
    _identity = -np.inf


def _co_combine(a: Acc, b: Acc, dims: int) -> Acc:
    """Chan et al. pairwise update of (n, means…, co-moments…)."""
    na, nb = a[0], b[0]
    n = na + nb
    safe = np.where(n > 0, n, 1)
    d = [b[1 + i] - a[1 + i] for i in range(dims)]
    means = [a[1 + i] + d[i] * (nb / safe) for i in range(dims)]
    w = na * nb / safe
    pairs = _PAIRS[dims]
    com = [a[1 + dims + p] + b[1 + dims + p] + d[i] * d[j] * w for p, (i, j) in enumerate(pairs)]
    out = (n, *means, *com)
    out = tuple(np.where(na == 0, y, x) for x, y in zip(out, b, strict=True))
    return tuple(np.where(nb == 0, y, x) for x, y in zip(out, a, strict=True))


def _co_deduct(c: Acc, b: Acc, dims: int) -> Acc:
    """Inverse of :func:`_co_combine`: the ``a`` with ``combine(a, b) == c``."""
    n, nb = c[0], b[0]
    na = n - nb
    safe_na = np.where(na > 0, na, 1)
    safe_n = np.where(n > 0, n, 1)
    d = [(b[1 + i] - c[1 + i]) * (n / safe_na) for i in range(dims)]
    means = [b[1 + i] - d[i] for i in range(dims)]
    w = na * nb / safe_n
    pairs = _PAIRS[dims]
    com = [c[1 + dims + p] - b[1 + dims + p] - d[i] * d[j] * w for p, (i, j) in enumerate(pairs)]
    # a sum of squares left after taking b out is known only to ~eps · the sum it came from;
    # below that it is rounding noise: 0 (the remaining values are all equal)
    com = [np.where(x <= _CANCELLATION * np.abs(c[1 + dims + p]), 0.0, x) if i == j else x
           for p, ((i, j), x) in enumerate(zip(pairs, com, strict=True))]
    out = (na, *means, *com)
    zero = na <= 0
    out = tuple(np.where(zero, np.zeros_like(x), x) for x in out)
    return tuple(np.where(nb == 0, y, x) for x, y in zip(out, c, strict=True))


_PAIRS = {1: ((0, 0),), 2: ((0, 0), (0, 1))}
_CANCELLATION = 64 * np.finfo(np.float64).eps


class Variance(AggregateOperation):
    """Sample variance (n - 1 denominator; null for fewer than 2 values)."""

    fields = (Field("n", "int64", shared="count"), Field("mean", "float64"), Field("m2", "float64"))
    ddof = 1

    def accumulate(self, acc: Acc, groups: np.ndarray, x: np.ndarray) -> Acc:
        m = len(acc[0])
        n = np.bincount(groups, minlength=m)
        mean = np.bincount(groups, x, minlength=m) / np.where(n > 0, n, 1)
        m2 = np.bincount(groups, (x - mean[groups]) ** 2, minlength=m)
        return _co_combine(acc, (n, mean, m2), 1)

    def combine(self, a: Acc, b: Acc) -> Acc:
        return _co_combine(a, b, 1)

    def deduct(self, a: Acc, b: Acc) -> Acc:
        return _co_deduct(a, b, 1)

    def finish(self, acc: Acc) -> pa.Array:
        n = acc[0]
        few = n <= self.ddof
        return _null_where(np.maximum(acc[2], 0.0) / np.where(few, 1, n - self.ddof), few)


class StdDev(Variance):
    """Sample standard deviation."""

    def finish(self, acc: Acc) -> pa.Array:
        v = super().finish(acc)
        return pc.sqrt(v)


class VarPop(Variance):
    """Population variance (n denominator; null for no value)."""

    ddof = 0


class StdDevPop(StdDev):
    """Population standard deviation."""

    ddof = 0


class LinearSlope(AggregateOperation):
    """Least-squares slope of ``y`` over ``x`` (Spark's ``regr_slope(y, x)``); inputs ``(x, y)``.

    The accumulator keeps ``x`` centred: a reference ``rx`` (the smallest ``x`` seen) and
    the mean of ``x - rx``, so epoch-second ``x`` (~1.7e9) loses no precision. Combining
    moves both sides to the smaller reference (a difference of two nearby floats, exact);
    deduct keeps the reference of the combined accumulator.
    """

    fields = (
        Field("n", "int64", shared="count"),
        Field("rx", "float64"),
        Field("mx", "float64"),
        Field("my", "float64"),
        Field("cxx", "float64"),
        Field("cxy", "float64"),
    )

    def __init__(self, x: ColumnOrName, y: ColumnOrName) -> None:
        super().__init__(x, y)

    def accumulate(self, acc: Acc, groups: np.ndarray, x: np.ndarray, y: np.ndarray) -> Acc:
        m = len(acc[0])
        n = np.bincount(groups, minlength=m)
        safe = np.where(n > 0, n, 1)
        rx = np.full(m, np.inf)
        np.minimum.at(rx, groups, x)
        rx = np.where(n > 0, rx, 0.0)
        xr = x - rx[groups]
        mx = np.bincount(groups, xr, minlength=m) / safe
        my = np.bincount(groups, y, minlength=m) / safe
        dx = xr - mx[groups]
        cxx = np.bincount(groups, dx * dx, minlength=m)
        cxy = np.bincount(groups, dx * (y - my[groups]), minlength=m)
        return self.combine(acc, (n, rx, mx, my, cxx, cxy))

    @staticmethod
    def _moved(acc: Acc, ref: np.ndarray) -> Acc:
        """(n, mean x − ref, my, cxx, cxy): the accumulator relative to reference ``ref``."""
        return (acc[0], acc[2] + (acc[1] - ref), *acc[3:])

    def combine(self, a: Acc, b: Acc) -> Acc:
        na, nb = a[0], b[0]
        ref = np.where(na == 0, b[1], np.where(nb == 0, a[1], np.minimum(a[1], b[1])))
        out = _co_combine(self._moved(a, ref), self._moved(b, ref), 2)
        return (out[0], np.where(out[0] == 0, 0.0, ref), *out[1:])

    def deduct(self, a: Acc, b: Acc) -> Acc:
        ref = a[1]
        out = _co_deduct(self._moved(a, ref), self._moved(b, ref), 2)
        return (out[0], np.where(out[0] <= 0, 0.0, ref), *out[1:])

    def _slope(self, acc: Acc) -> tuple[np.ndarray, np.ndarray]:
        n, mx, cxx = acc[0], acc[2], acc[4]
        # cxx below the rounding noise of deduct/combine (~eps · n · (mean x − rx)²) counts
        # as 0: all x equal, no slope (Spark returns null when var_pop(x) == 0)
        noise = 64 * np.finfo(np.float64).eps * n * (mx * mx + np.abs(cxx) / np.maximum(n, 1))
        bad = (n < 2) | (cxx <= noise)
        return acc[5] / np.where(bad, 1.0, cxx), bad

    def finish(self, acc: Acc) -> pa.Array:
        slope, bad = self._slope(acc)
        return _null_where(slope, bad)


class LinearIntercept(LinearSlope):
    """Least-squares intercept of ``y`` over ``x`` (Spark's ``regr_intercept(y, x)``)."""

    def finish(self, acc: Acc) -> pa.Array:
        slope, bad = self._slope(acc)
        return _null_where(acc[3] - slope * (acc[1] + acc[2]), bad)


class CollectSorted(AggregateOperation):
    """The values of a column as an array ordered by event time (order-sensitive).

    Ties in time are ordered by value, so the result does not depend on arrival order.
    State grows with the number of values (the only built-in whose state does).
    """

    fields = (Field("t", "list<int64>"), Field("v", "list<float64>"))
    result_type = "array<double>"

    def __init__(self, column: ColumnOrName) -> None:
        super().__init__(EVENT_TIME, column)

    @staticmethod
    def _build(gid: np.ndarray, t: np.ndarray, v: np.ndarray, n: int) -> Acc:
        if n == 0:
            return np.empty(0, object), np.empty(0, object)
        order = np.lexsort((v, t, gid))
        gid, t, v = gid[order], t[order], v[order]
        cuts = np.searchsorted(gid, np.arange(1, n))
        ts, vs = np.empty(n, object), np.empty(n, object)
        for i, (a, b) in enumerate(zip(np.split(t, cuts), np.split(v, cuts), strict=True)):
            ts[i], vs[i] = a, b
        return ts, vs

    @staticmethod
    def _flat(acc: Acc) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = len(acc[0])
        lens = np.fromiter((len(x) for x in acc[0]), np.int64, count=n)
        gid = np.repeat(np.arange(n), lens)
        if n == 0 or lens.sum() == 0:
            return gid, np.empty(0, np.int64), np.empty(0, np.float64)
        t = np.concatenate(list(acc[0])).astype(np.int64)
        v = np.concatenate(list(acc[1])).astype(np.float64)
        return gid, t, v

    def accumulate(self, acc: Acc, groups: np.ndarray, t: np.ndarray, v: np.ndarray) -> Acc:
        n = len(acc[0])
        g0, t0, v0 = self._flat(acc)
        gid = np.concatenate([g0, groups.astype(np.int64)])
        return self._build(gid, np.concatenate([t0, t]), np.concatenate([v0, v]), n)

    def combine(self, a: Acc, b: Acc) -> Acc:
        ga, ta, va = self._flat(a)
        gb, tb, vb = self._flat(b)
        n = len(a[0])
        return self._build(np.concatenate([ga, gb]), np.concatenate([ta, tb]), np.concatenate([va, vb]), n)

    def finish(self, acc: Acc) -> pa.Array:
        from jetspark.windowing.partials import to_arrow

        return to_arrow(self.fields[1], acc[1])


def _checked(*cols: ColumnOrName | None) -> None:
    for c in cols:
        if not isinstance(c, str | Column):
            raise AggregateError(
                f"a column argument is a column name (str) or a pyspark.sql.Column, got {c!r}")


def count(col: ColumnOrName | None = None) -> Count:
    """Number of rows, or of non-null values of a column (Spark's ``count``).

    Parameters
    ----------
    col : str or Column, optional
        Count the rows where this column (of any type; NaN counts as null) is not null.
        Omitted: count every row of the window (Spark's ``count("*")``).

    Returns
    -------
    Count
        A bigint result; 0 for a window with no such row.
    """
    if col is None:
        return Count()
    _checked(col)
    return Count(col)


def sum(col: ColumnOrName) -> Sum:
    """Sum of a numeric column (Spark's ``sum``), as a double; null when it has no value.

    Parameters
    ----------
    col : str or Column
        A numeric or boolean column, or an expression of one.

    Returns
    -------
    Sum
    """
    _checked(col)
    return Sum(col)


def avg(col: ColumnOrName) -> Mean:
    """Arithmetic mean of a numeric column (Spark's ``avg``); null when it has no value.

    Parameters
    ----------
    col : str or Column
        A numeric or boolean column, or an expression of one.

    Returns
    -------
    Mean
    """
    _checked(col)
    return Mean(col)


def min(col: ColumnOrName) -> Min:
    """Smallest value of a numeric column (Spark's ``min``), as a double.

    Parameters
    ----------
    col : str or Column
        A numeric or boolean column, or an expression of one.

    Returns
    -------
    Min
    """
    _checked(col)
    return Min(col)


def max(col: ColumnOrName) -> Max:
    """Greatest value of a numeric column (Spark's ``max``), as a double.

    Parameters
    ----------
    col : str or Column
        A numeric or boolean column, or an expression of one.

    Returns
    -------
    Max
    """
    _checked(col)
    return Max(col)


def var_samp(col: ColumnOrName) -> Variance:
    """Sample variance (n − 1 denominator) of a numeric column (Spark's ``var_samp``,
    ``variance``); null for fewer than 2 values.

    Parameters
    ----------
    col : str or Column
        A numeric or boolean column, or an expression of one.

    Returns
    -------
    Variance
    """
    _checked(col)
    return Variance(col)


def var_pop(col: ColumnOrName) -> VarPop:
    """Population variance (n denominator) of a numeric column (Spark's ``var_pop``); null
    when it has no value.

    Parameters
    ----------
    col : str or Column
        A numeric or boolean column, or an expression of one.

    Returns
    -------
    VarPop
    """
    _checked(col)
    return VarPop(col)


def stddev_samp(col: ColumnOrName) -> StdDev:
    """Sample standard deviation of a numeric column (Spark's ``stddev_samp``, ``stddev``);
    null for fewer than 2 values.

    Parameters
    ----------
    col : str or Column
        A numeric or boolean column, or an expression of one.

    Returns
    -------
    StdDev
    """
    _checked(col)
    return StdDev(col)


def stddev_pop(col: ColumnOrName) -> StdDevPop:
    """Population standard deviation of a numeric column (Spark's ``stddev_pop``); null when
    it has no value.

    Parameters
    ----------
    col : str or Column
        A numeric or boolean column, or an expression of one.

    Returns
    -------
    StdDevPop
    """
    _checked(col)
    return StdDevPop(col)


def regr_slope(y: ColumnOrName, x: ColumnOrName) -> LinearSlope:
    """Least-squares slope of ``y`` over ``x`` — Spark's ``regr_slope(y, x)``, in Spark's order:
    the dependent variable first.

    Rows where ``x`` or ``y`` is null are left out; null for fewer than 2 such rows or when
    every ``x`` is equal.

    Parameters
    ----------
    y : str or Column
        The dependent variable (numeric).
    x : str or Column
        The independent variable (numeric; epoch seconds lose no precision).

    Returns
    -------
    LinearSlope

    See Also
    --------
    linear_trend : the same slope in Jet's order, ``linear_trend(x, y)``.
    """
    _checked(y, x)
    return LinearSlope(x, y)


def regr_intercept(y: ColumnOrName, x: ColumnOrName) -> LinearIntercept:
    """Least-squares intercept of ``y`` over ``x`` — Spark's ``regr_intercept(y, x)``, in
    Spark's order: the dependent variable first. Null when
    [`regr_slope`][jetspark.windowing.ops.regr_slope] is.

    Parameters
    ----------
    y : str or Column
        The dependent variable (numeric).
    x : str or Column
        The independent variable (numeric).

    Returns
    -------
    LinearIntercept
    """
    _checked(y, x)
    return LinearIntercept(x, y)


def linear_trend(x: ColumnOrName, y: ColumnOrName) -> LinearSlope:
    """Least-squares slope of ``y`` over ``x`` — Jet's ``linearTrend(getX, getY)``, in Jet's
    order: the independent variable first. ``linear_trend(x, y)`` equals ``regr_slope(y, x)``.

    Parameters
    ----------
    x : str or Column
        The independent variable (numeric; epoch seconds lose no precision).
    y : str or Column
        The dependent variable (numeric).

    Returns
    -------
    LinearSlope

    See Also
    --------
    regr_slope : the same slope in Spark's order, ``regr_slope(y, x)``.
    """
    _checked(x, y)
    return LinearSlope(x, y)


def collect_sorted(col: ColumnOrName) -> CollectSorted:
    """The values of a numeric column as an ``array<double>`` in event-time order (ties by
    value). Order-sensitive, and the only built-in whose state grows with the number of values.

    Parameters
    ----------
    col : str or Column
        A numeric or boolean column, or an expression of one.

    Returns
    -------
    CollectSorted
    """
    _checked(col)
    return CollectSorted(col)


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"jetspark.windowing.ops.{old} is deprecated: use {new}", DeprecationWarning, stacklevel=3)


def linear_slope(x: ColumnOrName, y: ColumnOrName) -> LinearSlope:
    """Deprecated: the slope of ``y`` over ``x``, arguments in Jet's order (``x`` first).

    Use ``regr_slope(y, x)`` (Spark's order) or ``linear_trend(x, y)`` (Jet's name and order);
    this one takes the same arguments as ``linear_trend`` and warns with a
    ``DeprecationWarning``.

    Parameters
    ----------
    x : str or Column
        The independent variable.
    y : str or Column
        The dependent variable.

    Returns
    -------
    LinearSlope
    """
    _deprecated("linear_slope(x, y)", "regr_slope(y, x) or linear_trend(x, y)")
    _checked(x, y)
    return LinearSlope(x, y)


def linear_intercept(x: ColumnOrName, y: ColumnOrName) -> LinearIntercept:
    """Deprecated: the intercept of ``y`` over ``x``, arguments ``x`` first.

    Use ``regr_intercept(y, x)`` (Spark's order); warns with a ``DeprecationWarning``.

    Parameters
    ----------
    x : str or Column
        The independent variable.
    y : str or Column
        The dependent variable.

    Returns
    -------
    LinearIntercept
    """
    _deprecated("linear_intercept(x, y)", "regr_intercept(y, x)")
    _checked(x, y)
    return LinearIntercept(x, y)


# Spark's other names of the same functions, and the underscored names that leave Python's
# built-ins alone when imported unqualified.
mean = avg
variance = var_samp
stddev = stddev_samp
sum_ = sum
min_ = min
max_ = max
