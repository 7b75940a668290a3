"""Confluent's wire format, vectorized: a magic byte 0, a 4-byte big-endian schema id, then
the payload (Avro binary, JSON Schema's JSON; Protobuf adds message indexes first).

:func:`split` reads a whole Arrow column of record values at once — the schema id of each
record and the payload as a zero-copy slice of the same buffer — and :func:`frame` does the
reverse for a sink. No Python call per record.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

MAGIC = 0
HEADER_BYTES = 5

NULL = -1
"""The schema id of a null value (a tombstone)."""
UNFRAMED = -2
"""The schema id of a value shorter than the header or without the magic byte."""


@dataclass(frozen=True)
class Framed:
    """One column of values taken apart: per record the schema id (or :data:`NULL`,
    :data:`UNFRAMED`) and the payload after the header (empty when there is none)."""

    schema_ids: np.ndarray
    payloads: pa.BinaryArray

    def ids(self) -> list[int]:
        """The distinct schema ids the column holds, ascending."""
        ids = np.unique(self.schema_ids)
        return [int(i) for i in ids[ids >= 0]]


def split(values: pa.Array) -> Framed:
    """Schema id and payload of every value of a binary column (any offset, nulls allowed)."""
    values = values.cast(pa.binary()) if values.type != pa.binary() else values
    n = len(values)
    if n == 0:
        return Framed(np.zeros(0, np.int64), pa.array([], pa.binary()))
    _validity, offsets_buf, data_buf = values.buffers()
    offsets = np.frombuffer(offsets_buf, np.int32, n + 1, values.offset * 4).astype(np.int64)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    starts, ends = offsets[:-1], offsets[1:]
    valid = ~np.asarray(values.is_null(), dtype=bool)
    framed = valid & (ends - starts >= HEADER_BYTES)
    at = starts[framed]
    framed[framed] = data[at] == MAGIC
    ids = np.full(n, UNFRAMED, np.int64)
    ids[~valid] = NULL
    at = starts[framed]
    if len(at):
        head = data[at[:, None] + np.arange(1, HEADER_BYTES)].astype(np.int64)
        ids[framed] = (head[:, 0] << 24) | (head[:, 1] << 16) | (head[:, 2] << 8) | head[:, 3]
    payload_starts = np.where(framed, starts + HEADER_BYTES, ends).astype(np.int32)
    payload_offsets = np.empty(n + 1, np.int32)
    # payload i is data[payload_starts[i]:ends[i]]: a binary array needs contiguous offsets,
    # so the payloads are gathered into a buffer of their own (one vectorized copy)
    lengths = (ends - payload_starts).astype(np.int64)
    payload_offsets[0] = 0
    np.cumsum(lengths, out=payload_offsets[1:])
    gather = _ranges(payload_starts.astype(np.int64), lengths)
    payloads = pa.BinaryArray.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(payload_offsets), pa.py_buffer(data[gather].tobytes())])
    return Framed(ids, payloads)


def frame(schema_ids: np.ndarray, payloads: pa.Array) -> pa.BinaryArray:
    """Values in the wire format: each payload behind the magic byte and its schema id."""
    payloads = payloads.cast(pa.binary()) if payloads.type != pa.binary() else payloads
    n = len(payloads)
    ids = np.broadcast_to(np.asarray(schema_ids, np.int64), (n,))
    _validity, offsets_buf, data_buf = payloads.buffers()
    offsets = np.frombuffer(offsets_buf, np.int32, n + 1, payloads.offset * 4).astype(np.int64)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    lengths = offsets[1:] - offsets[:-1]
    out_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths + HEADER_BYTES, out=out_offsets[1:])
    out = np.empty(int(out_offsets[-1]), np.uint8)
    head = out_offsets[:-1]
    out[head] = MAGIC
    for i, shift in enumerate((24, 16, 8, 0), start=1):
        out[head + i] = (ids >> shift) & 0xFF
    body = _ranges(head + HEADER_BYTES, lengths)
    out[body] = data[_ranges(offsets[:-1], lengths)]
    return pa.BinaryArray.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(out_offsets.astype(np.int32)), pa.py_buffer(out.tobytes())])


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[i] … starts[i] + lengths[i] - 1`` of every i, concatenated."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    nonzero = lengths > 0
    starts, lengths = starts[nonzero], lengths[nonzero]
    step = np.ones(total, np.int64)
    ends = np.cumsum(lengths)
    step[0] = starts[0]
    step[ends[:-1]] = starts[1:] - (starts[:-1] + lengths[:-1]) + 1
    return np.cumsum(step)
