"""Stage 2's Arrow ↔ numpy through buffers: the same values as pyarrow's own conversion, and a
new worker running a static query's stage 2 never imports pandas."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from jetspark.columns import from_numpy
from jetspark.windowing.arrow_numpy import take_rows, to_numpy

TS = pa.timestamp("us", tz="UTC")


@pytest.mark.parametrize("arrow_type", [pa.int64(), pa.int32(), pa.float64(), TS])
def test_to_numpy_reads_slices_and_chunks_as_pyarrow_does(arrow_type) -> None:
    values = pa.array([3, -1, 7, 0, 12], pa.int64()).cast(arrow_type)
    for arr in (values, values.slice(2), pa.chunked_array([values.slice(0, 2), values.slice(3)])):
        expected = arr.cast(pa.int64()) if arrow_type == TS else arr
        got = to_numpy(arr)
        assert got.tolist() == expected.to_pylist()
        assert got.dtype == (np.int64 if arrow_type == TS else arrow_type.to_pandas_dtype())


def test_to_numpy_falls_back_for_nulls() -> None:
    got = to_numpy(pa.array([1.0, None, 2.0]))
    assert np.isnan(got[1]) and got[[0, 2]].tolist() == [1.0, 2.0]


@pytest.mark.parametrize("arrow_type", [pa.int64(), pa.float64(), TS, pa.bool_()])
def test_from_numpy_equals_pa_array_with_a_mask(arrow_type) -> None:
    values = np.array([1, 0, 5, 2, 9, 1, 1, 0, 4], dtype=np.int64)
    mask = np.arange(len(values)) % 4 == 1
    expected = pa.array(values.astype(bool) if arrow_type == pa.bool_() else values, mask=mask)
    assert from_numpy(values, arrow_type, mask).equals(expected.cast(arrow_type))
    assert from_numpy(values, arrow_type).null_count == 0


def test_take_rows_takes_by_position() -> None:
    t = pa.table({"k": ["a", "b", "c"], "x": [1, 2, 3]})
    assert take_rows(t, np.array([2, 0, 2])).to_pydict() == {"k": ["c", "a", "c"], "x": [3, 1, 3]}


def test_a_static_stage_2_does_not_import_pandas() -> None:
    """A new Python worker (pyspark's worker imports loaded, as Spark starts one) runs stage 2
    of a static query without loading pandas (about 0.2 s of CPU per new worker)."""
    code = """
import sys
import pyspark.worker, pyspark.sql.pandas.serializers
import numpy as np, pyarrow as pa
from jetspark.windowing import ops, sliding
from jetspark.windowing.api import _batch_stage2
from jetspark.columns import from_numpy
from jetspark.windowing.plan import Plan
aggs = {"n": ops.count(), "s": ops.sum_("x"), "hi": ops.max_("x"), "sd": ops.stddev("x")}
plan = Plan.build("k", "ts", sliding("30 seconds", "10 seconds"), aggs)
i64 = lambda *v: from_numpy(np.array(v), pa.int64())
f64 = lambda *v: from_numpy(np.array(v, float), pa.float64())
cells = pa.table({"k": i64(1, 1, 2), "__frame": i64(5, 6, 5), "__s0_count": i64(1, 2, 1),
                  "__s1_count": i64(1, 2, 1), "__a1_s": f64(1, 5, 3), "__a2_m": f64(1, 3, 3),
                  "__a3_mean": f64(1, 2.5, 3), "__a3_m2": f64(0, 0.5, 0)})
assert [c for c, _ in plan.partial_spark_fields()] == cells.column_names[1:]
out = pa.Table.from_batches(list(_batch_stage2(plan)(iter(cells.to_batches()))))
rows = sorted(zip(out.column("k").to_pylist(), out.column("n").to_pylist(), out.column("s").to_pylist()))
print("pandas" in sys.modules, rows)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    # key 1: frames 5 (1 row, x=1) and 6 (2 rows, sum 5); key 2: frame 5; windows of 3 frames
    assert done.stdout.split(" ", 1) == [
        "False",
        "[(1, 1, 1.0), (1, 2, 5.0), (1, 3, 6.0), (1, 3, 6.0), (2, 1, 3.0), (2, 1, 3.0), (2, 1, 3.0)]\n",
    ]
