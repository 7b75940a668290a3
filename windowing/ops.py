"""Built-in aggregate operations (all vectorized; see :mod:`.aggregate_operation` for the laws).

``count()``, ``sum_(c)``, ``mean(c)``, ``min_(c)``, ``max_(c)``, ``variance(c)``,
``stddev(c)``, ``linear_slope(x, y)``, ``linear_intercept(x, y)`` and the
order-sensitive ``collect_sorted(c)`` (values in event-time order). ``sum``, ``min`` and
``max`` are aliases of the underscored names for ``ops.sum("x")`` style use.
Numeric and boolean inputs are read as float64 (NaN = null; ``count(c)`` reads only which
values are null, of any type); results follow Spark (``count`` → bigint, empty or
all-null input → null, ``variance``/``stddev`` are the sample versions).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jetspark.windowing.aggregate_operation import EVENT_TIME, Acc, AggregateOperation, Field


def _null_where(values: np.ndarray, null: np.ndarray) -> pa.Array:
    return pa.array(values, mask=null)


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


class LinearSlope(AggregateOperation):
    """Least-squares slope of ``y`` over ``x`` (Spark's ``regr_slope(y, x)``).

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

    def __init__(self, x: str, y: str) -> None:
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

    def __init__(self, column: str) -> None:
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


def count(column: str | None = None) -> Count:
    """Number of rows, or of non-null values of ``column``."""
    return Count() if column is None else Count(column)


def sum_(column: str) -> Sum:
    """Sum of ``column``."""
    return Sum(column)


def mean(column: str) -> Mean:
    """Mean of ``column``."""
    return Mean(column)


def min_(column: str) -> Min:
    """Minimum of ``column``."""
    return Min(column)


def max_(column: str) -> Max:
    """Maximum of ``column``."""
    return Max(column)


def variance(column: str) -> Variance:
    """Sample variance of ``column``."""
    return Variance(column)


def stddev(column: str) -> StdDev:
    """Sample standard deviation of ``column``."""
    return StdDev(column)


def linear_slope(x: str, y: str) -> LinearSlope:
    """Least-squares slope of ``y`` over ``x`` (Jet's linearTrend)."""
    return LinearSlope(x, y)


def linear_intercept(x: str, y: str) -> LinearIntercept:
    """Least-squares intercept of ``y`` over ``x``."""
    return LinearIntercept(x, y)


def collect_sorted(column: str) -> CollectSorted:
    """Values of ``column`` as an array sorted by event time."""
    return CollectSorted(column)


sum = sum_
min = min_
max = max_
