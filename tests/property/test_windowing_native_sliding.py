"""Sliding windows on Spark's aggregations (``engine="native"``: frames, then windows) equal
the naive reference on random static data: keys with a null, null and NaN values (NaN is
null, as on the Python engine), every built-in operation it runs."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from jetspark.windowing import ops, sliding, window_aggregate
from jetspark.windowing.reference import reference_windows

AGGS = {
    "n": ops.count(),
    "nx": ops.count("x"),
    "s": ops.sum_("x"),
    "m": ops.mean("x"),
    "lo": ops.min_("x"),
    "hi": ops.max_("x"),
    "var": ops.variance("x"),
    "sd": ops.stddev("x"),
    "vp": ops.var_pop("x"),
    "sdp": ops.stddev_pop("x"),
    "slope": ops.linear_trend("x", "y"),
    "icpt": ops.regr_intercept("y", "x"),
}
values = st.one_of(st.none(), st.just(math.nan), st.integers(-50, 50).map(float),
                   st.floats(-1e3, 1e3).filter(lambda v: v == 0 or abs(v) >= 1e-3))  # fmt: skip
events = st.lists(
    st.tuples(st.sampled_from(["a", "b", None]), st.integers(0, 2_000_000), values, st.integers(-20, 20)),
    min_size=1,
    max_size=50,
)
# the size a whole multiple (2..6) of a slide of 1..7 s; 1 s slides in ms, to cross frame bounds
windows = st.builds(lambda slide, k: sliding(slide * k, slide), st.sampled_from([1000, 3000, 7000]),
                    st.integers(2, 6))  # fmt: skip


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-7, abs_tol=1e-6)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(evs=events, window=windows)
def test_native_sliding_equals_reference(spark, evs, window) -> None:
    rows = [(k, t * 10, x, float(y)) for k, t, x, y in evs]
    df = spark.createDataFrame(rows, "k string, t long, x double, y double")
    df = df.withColumn("ts", F.timestamp_micros("t"))
    out = window_aggregate(df, key="k", time="ts", window=window, aggs=AGGS, engine="native")
    plan = out._jdf.queryExecution().executedPlan().toString()
    assert "ArrowEvalPython" not in plan and "MapInArrow" not in plan and "Generate explode" in plan, plan
    got = {}
    bounds = [F.unix_micros(c).alias(c) for c in ("window_start", "window_end")]
    for r in out.select("k", *bounds, *AGGS).collect():
        r = r.asDict()
        w = (r.pop("k"), r.pop("window_start"), r.pop("window_end"))
        assert w not in got, f"window emitted twice: {w}"
        got[w] = r
    ref_events = [(k, t * 10, {"x": None if x is None or math.isnan(x) else x, "y": float(y)})
                  for k, t, x, y in evs]  # fmt: skip
    expected = reference_windows(ref_events, window, AGGS)
    assert set(got) == set(expected)
    for w, res in expected.items():
        for name, value in res.items():
            assert _close(got[w][name], value), (w, name, got[w][name], value)
