"""The column contract between jetspark's sources and its windowing (docs/design.md, "Watermarks").

Every row a jetspark source yields carries, after its payload columns:

- ``watermark`` (timestamp): the batch's coalesced watermark W, the same on every row of a
  batch; the stream helpers (:func:`jetspark.datasources.read_kafka_stream`, …) declare it as
  Spark's event-time column with ``withWatermark("watermark", "0 seconds")``;
- ``heartbeat`` (boolean): true on a row without payload that only carries W (a batch of
  gaps or late records still moves Spark's watermark); windowing drops these rows;
- ``late`` (boolean): the record's event time was behind W when it was read.

Event times and watermarks are :data:`TIMESTAMP_TYPE`: microseconds, UTC.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

WATERMARK = "watermark"
HEARTBEAT = "heartbeat"
LATE = "late"
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

WATERMARK_FIELDS: tuple[tuple[str, pa.DataType], ...] = (
    (WATERMARK, TIMESTAMP_TYPE), (HEARTBEAT, pa.bool_()), (LATE, pa.bool_()))
"""The three columns above as Arrow fields, in the order the sources emit them."""
WATERMARK_DDL = f"{WATERMARK} timestamp, {HEARTBEAT} boolean, {LATE} boolean"
"""The same as Spark DDL."""


def blank(array: pa.Array, stub: np.ndarray | pa.Array | None) -> pa.Array:
    """``array`` with nulls where ``stub`` is true: the payload of a late record's stub row."""
    if stub is None:
        return array
    mask = stub if isinstance(stub, pa.Array | pa.ChunkedArray) else pa.array(stub)
    return pc.if_else(mask, pa.nulls(len(array), array.type), array)


# -- columns built from buffers -------------------------------------------------------------------
# pyarrow imports pandas (about half a second) the first time it converts Python or numpy values
# (pa.array, pa.scalar, compute functions given Python scalars); a source's read task builds its
# columns from buffers instead, so a new worker never pays that when it only reads.

_INTEGERS = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
_FLOATS = {16: np.float16, 32: np.float32, 64: np.float64}


def _validity(mask: np.ndarray | None) -> pa.Buffer | None:
    """Arrow's validity bitmap of the rows where ``mask`` is false (None: all valid)."""
    if mask is None or not mask.any():
        return None
    return pa.py_buffer(np.packbits(~mask, bitorder="little"))


def from_numpy(values: np.ndarray, arrow_type: pa.DataType, mask: np.ndarray | None = None) -> pa.Array:
    """A boolean, integer, float or timestamp column of ``values`` (null where ``mask`` is true)."""
    n = len(values)
    if pa.types.is_boolean(arrow_type):
        data = np.packbits(np.asarray(values, dtype=bool), bitorder="little")
    else:
        kind = _FLOATS if pa.types.is_floating(arrow_type) else _INTEGERS
        data = np.ascontiguousarray(values, dtype=kind[arrow_type.bit_width])
    return pa.Array.from_buffers(arrow_type, n, [_validity(mask), pa.py_buffer(data)])


def filled(value: int | bool | None, arrow_type: pa.DataType, n: int) -> pa.Array:
    """``n`` rows of one boolean, integer or timestamp (microseconds); None: ``n`` nulls."""
    if value is None:
        return pa.nulls(n, arrow_type)
    kind = bool if pa.types.is_boolean(arrow_type) else _INTEGERS[arrow_type.bit_width]
    return from_numpy(np.full(n, value, dtype=kind), arrow_type)


def filled_text(text: str, n: int) -> pa.Array:
    """``n`` rows of one string."""
    raw = text.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])
