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
