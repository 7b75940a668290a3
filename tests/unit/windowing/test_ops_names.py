"""The operations under Spark's names and argument order, Jet's linear_trend, and the
deprecated linear_slope / linear_intercept (same operations, same order as before)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from jetspark.windowing import AggregateError, ops


def _result(op: ops.AggregateOperation, *columns: list[float]) -> list:
    """The operation over one group holding the given rows."""
    arrays = [np.asarray(c, dtype=np.float64) for c in columns]
    groups = np.zeros(len(arrays[0]), dtype=np.int64)
    acc = op.accumulate(op.create(1), groups, *arrays)
    res = op.finish(acc)
    return res.to_pylist() if hasattr(res, "to_pylist") else list(res)


def test_regr_slope_takes_y_first_as_spark_and_linear_trend_x_first_as_jet() -> None:
    x, y = [1.0, 2.0, 3.0, 4.0], [3.0, 5.0, 7.0, 9.5]
    slope = np.polyfit(x, y, 1)[0]
    assert ops.regr_slope("y", "x").inputs == ("x", "y") == ops.linear_trend("x", "y").inputs
    assert _result(ops.regr_slope("y", "x"), x, y)[0] == pytest.approx(slope)
    assert _result(ops.linear_trend("x", "y"), x, y)[0] == pytest.approx(slope)
    intercept = np.polyfit(x, y, 1)[1]
    assert _result(ops.regr_intercept("y", "x"), x, y)[0] == pytest.approx(intercept)


def test_linear_slope_and_linear_intercept_still_work_in_their_order_and_warn() -> None:
    deprecated = r"linear_slope\(x, y\) is deprecated: use regr_slope\(y, x\)"
    with pytest.warns(DeprecationWarning, match=deprecated):
        op = ops.linear_slope("x", "y")
    assert type(op) is ops.LinearSlope and op.inputs == ("x", "y")
    with pytest.warns(DeprecationWarning, match=r"use regr_intercept\(y, x\)"):
        op = ops.linear_intercept("x", "y")
    assert type(op) is ops.LinearIntercept and op.inputs == ("x", "y")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ops.regr_slope("y", "x"), ops.linear_trend("x", "y"), ops.sum_("x")


def test_spark_names_and_their_aliases() -> None:
    assert ops.mean is ops.avg and ops.variance is ops.var_samp and ops.stddev is ops.stddev_samp
    assert ops.sum_ is ops.sum and ops.min_ is ops.min and ops.max_ is ops.max
    assert [type(f("c")).__name__ for f in (ops.sum, ops.avg, ops.min, ops.max, ops.var_samp,
                                            ops.var_pop, ops.stddev_samp, ops.stddev_pop)] == [
        "Sum", "Mean", "Min", "Max", "Variance", "VarPop", "StdDev", "StdDevPop"]
    assert ops.count().inputs == () and ops.count("c").inputs == ("c",)


def test_population_variance_and_stddev_as_spark() -> None:
    xs = [1.0, 2.0, 4.0, 8.0]
    assert _result(ops.var_pop("x"), xs)[0] == pytest.approx(np.var(xs))
    assert _result(ops.stddev_pop("x"), xs)[0] == pytest.approx(np.std(xs))
    assert _result(ops.var_samp("x"), xs)[0] == pytest.approx(np.var(xs, ddof=1))
    assert _result(ops.var_pop("x"), [5.0]) == [0.0] and _result(ops.var_samp("x"), [5.0]) == [None]
    assert _result(ops.stddev_pop("x"), []) == [None]  # no value: null, as Spark


@pytest.mark.parametrize("make", [lambda: ops.sum(3), lambda: ops.regr_slope("y", None),
                                  lambda: ops.count(1.5)])
def test_a_column_argument_is_a_name_or_a_column(make) -> None:
    with pytest.raises(AggregateError, match=r"a column name \(str\) or a pyspark\.sql\.Column"):
        make()


def test_the_naive_reference_knows_population_variance() -> None:
    from jetspark.windowing.reference import naive_result

    rows = [("k", i, {"x": x}) for i, x in enumerate([1.0, 2.0, 4.0, 8.0])]
    assert naive_result(ops.var_pop("x"), rows) == pytest.approx(np.var([1.0, 2.0, 4.0, 8.0]))
    assert naive_result(ops.stddev_pop("x"), rows[:1]) == 0.0
    assert naive_result(ops.stddev("x"), rows[:1]) is None
