"""Where the number of ``withWatermark`` in the plan is unknown (a Spark Connect client has no
JVM plan), windows are emitted at Spark's watermark only: the watermark the rows carry is
ignored (the fallback; on real Spark over Connect: the README's streaming example in
tests/integration/test_spark_connect.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pyarrow as pa

from jetspark.windowing import ops, tumbling
from jetspark.windowing.accumulate_by_frame import accumulate_events
from jetspark.windowing.api import _watermarks_defined
from jetspark.windowing.plan import Plan
from jetspark.windowing.stateful import _carried_ms, _Core

SEC = 1_000_000


def test_a_frame_without_a_jvm_plan_has_an_unknown_number_of_watermarks() -> None:
    assert _watermarks_defined(SimpleNamespace()) is None


def test_without_a_known_delay_the_carried_watermark_closes_no_window() -> None:
    plan = Plan.build("k", "t", tumbling("1 second"), {"n": ops.count()}, True)
    events = pa.table({"k": ["a", "a"], "t": pa.array([0, SEC // 2], pa.timestamp("us", tz="UTC"))})
    partials = accumulate_events(plan, events)
    core = _Core(plan, partials.schema, {"k": pa.string()})
    carried_us = 5 * SEC  # the rows' micro-batch moved W far past the window's end
    assert _carried_ms(carried_us, None) is None  # the fallback: no delay known
    res, blob, _ = core.run(None, None, partials, 0, carried_ms=_carried_ms(carried_us, None))
    assert res is None or res.output.num_rows == 0  # not emitted on the carried W
    assert blob is not None
    res, _, _ = core.run(blob, 0, None, 1000)  # Spark's watermark reaches the end: emitted
    assert res.output.to_pydict()["n"] == [2]
    # with the delay known (one withWatermark), the same rows close it in their own micro-batch
    res, _, _ = core.run(None, None, partials, 0, carried_ms=_carried_ms(carried_us, 0))
    assert res.output.to_pydict()["n"] == [2]
