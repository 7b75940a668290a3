"""Arrow ↔ numpy through buffers, for stage 2's fixed-width columns.

pyarrow imports pandas the first time it converts numpy values (``pa.array``,
``Array.to_numpy``, ``Table.take`` with a numpy index): about 0.2 s of CPU in every new
Python worker, which Spark starts for a query's first tasks and again after a minute idle.
Stage 2 of a static query reads and writes only fixed-width columns (integers, floats,
timestamps, booleans), so it goes through the buffers instead and such a worker never
loads pandas. Anything else falls back to pyarrow's own conversion. Columns are built by
:func:`jetspark.columns.from_numpy`, as the sources build theirs.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from jetspark.columns import from_numpy


def _fixed_width(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_timestamp(t)


def to_numpy(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The values of an integer, float or timestamp column (int64 for timestamps) without
    nulls, zero-copy where possible; other columns as ``to_numpy(zero_copy_only=False)``."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
    t = arr.type
    if not _fixed_width(t) or arr.null_count or pa.types.is_float16(t):
        return arr.to_numpy(zero_copy_only=False)
    dtype = np.dtype(np.int64) if pa.types.is_timestamp(t) else np.dtype(t.to_pandas_dtype())
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr), offset=arr.offset * dtype.itemsize)


def take_rows(table: pa.Table, idx: np.ndarray) -> pa.Table:
    """``table.take(idx)`` with the index handed over as an Arrow array."""
    return table.take(from_numpy(idx, pa.int64()))
