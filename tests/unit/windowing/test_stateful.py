"""The streaming state of a bucket: the timer it holds is recorded in its blob."""

from __future__ import annotations

import pyarrow as pa

from jetspark.windowing import ops, sliding
from jetspark.windowing.accumulate_by_frame import accumulate_events
from jetspark.windowing.partials import dump_table
from jetspark.windowing.plan import Plan
from jetspark.windowing.stateful import TIMER_KEY, _Core, stored_timers

SEC = 1_000_000


def _core() -> tuple[_Core, pa.Table]:
    plan = Plan.build("k", "t", sliding("4 seconds", "1 second"), {"n": ops.count()}, True)
    events = pa.table({"k": ["a", "a", "b"],
                       "t": pa.array([1 * SEC, 2 * SEC, 2 * SEC], pa.timestamp("us", tz="UTC"))})
    partials = accumulate_events(plan, events)
    return _Core(plan, partials.schema, {"k": pa.string()}), partials


def test_the_next_timer_is_written_into_the_blob_and_read_back_without_asking_spark() -> None:
    core, partials = _core()
    res, blob, timer = core.run(None, None, partials, 0)
    assert blob is not None and timer is not None
    assert timer == -(-res.next_close_us // 1000)  # the end of the first window to close
    assert stored_timers(blob) == {timer}
    # the next step reads the blob as state: the record does not leak into the windows
    res2, blob2, timer2 = core.run(blob, 0, None, timer)
    assert res2.output.num_rows > 0 and stored_timers(blob2) == {timer2}


def test_no_state_no_timer_and_a_blob_of_an_older_version_asks_spark() -> None:
    core, partials = _core()
    _, blob, _ = core.run(None, None, partials, 0)
    assert stored_timers(None) == set()
    old = pa.ipc.open_stream(pa.py_buffer(blob)).read_all()
    meta = {k: v for k, v in (old.schema.metadata or {}).items() if k != TIMER_KEY} or None
    old_blob = dump_table(old.replace_schema_metadata(meta))
    assert stored_timers(old_blob) is None
    # and such a blob still restores
    res, blob2, timer = core.run(old_blob, 0, None, 10_000)
    assert res is not None and stored_timers(blob2) == ({timer} if timer is not None else set())


def _warnings_shown(module: str) -> str:
    """stderr of a new interpreter that imports this module and then has ``module`` warn
    what pandas warns about PySpark's padding of applyInPandasWithState's output."""
    import subprocess
    import sys

    code = ("import warnings, jetspark.windowing.stateful as s\n"
            f"warnings.warn_explicit(s.PYSPARK_PADDING_WARNING + ' is deprecated.', FutureWarning, "
            f"'worker.py', 3771, module={module!r})\n")
    return subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True, text=True,
                          check=True).stderr


def test_pandas_warning_about_pysparks_padding_is_silenced_in_the_worker_module_only() -> None:
    assert _warnings_shown("pyspark.worker") == ""
    assert "FutureWarning" in _warnings_shown("users_own_module")
