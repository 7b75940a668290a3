"""Confluent's wire format, vectorized: a magic byte 0, a 4-byte big-endian schema id, then
the payload (Avro binary, JSON Schema's JSON; Protobuf adds message indexes first).

:func:`split` reads a whole Arrow column of record values at once — the schema id of each
record and where its payload lies in the column's own buffer, copying nothing — and
:func:`frame` does the reverse for a sink. No Python call per record.
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
MAX_SCHEMA_ID = 2**31 - 1
"""Schema ids are Java ints in the registries: 0 … 2**31 - 1."""


@dataclass(frozen=True)
class Framed:
    """One column of values taken apart: per record the schema id (or :data:`NULL`,
    :data:`UNFRAMED`) and where its payload lies in ``data``, the column's own data buffer
    (``data[starts[i]:ends[i]]``, empty when there is none): nothing is copied."""

    schema_ids: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    data: np.ndarray

    @property
    def payloads(self) -> pa.BinaryArray:
        """The payloads as a binary array of their own (one vectorized copy; null where the
        schema id is :data:`NULL` or :data:`UNFRAMED`)."""
        n = len(self.schema_ids)
        lengths = self.ends - self.starts
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        body = self.data[_covered(len(self.data), self.starts, self.ends)]
        missing = self.schema_ids < 0
        validity = None if not missing.any() else pa.py_buffer(np.packbits(~missing, bitorder="little"))
        return pa.BinaryArray.from_buffers(
            pa.binary(), n, [validity, pa.py_buffer(_int32_offsets(offsets)), pa.py_buffer(body)])

    def ids(self) -> list[int]:
        """The distinct schema ids the column holds, ascending."""
        ids = np.unique(self.schema_ids)
        return [int(i) for i in ids[ids >= 0]]


def split(values: pa.Array) -> Framed:
    """Schema id and payload of every value of a binary column (any offset, nulls allowed)."""
    values = values.cast(pa.binary()) if values.type != pa.binary() else values
    n = len(values)
    if n == 0:
        empty = np.zeros(0, np.int64)
        return Framed(empty, empty, empty, np.zeros(0, np.uint8))
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
    return Framed(ids, np.where(framed, starts + HEADER_BYTES, ends), ends, data)


def frame(schema_ids: np.ndarray | int, payloads: pa.Array) -> pa.BinaryArray:
    """Values in the wire format: each payload behind the magic byte and its schema id (ids
    0 … 2**31 - 1); a null payload stays null (a tombstone)."""
    payloads = payloads.cast(pa.binary()) if payloads.type != pa.binary() else payloads
    n = len(payloads)
    ids = np.broadcast_to(np.asarray(schema_ids, np.int64), (n,))
    if n and (ids.min() < 0 or ids.max() > MAX_SCHEMA_ID):
        bad = int(ids[(ids < 0) | (ids > MAX_SCHEMA_ID)][0])
        raise ValueError(f"schema id {bad} is not in 0 … {MAX_SCHEMA_ID}")
    _validity, offsets_buf, data_buf = payloads.buffers()
    offsets = np.frombuffer(offsets_buf, np.int32, n + 1, payloads.offset * 4).astype(np.int64)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    present = ~np.asarray(payloads.is_null(), dtype=bool)
    lengths = np.where(present, offsets[1:] - offsets[:-1], 0)
    out_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths + HEADER_BYTES * present, out=out_offsets[1:])
    out = np.empty(int(out_offsets[-1]), np.uint8)
    head = out_offsets[:-1][present]
    header = np.zeros(len(out), bool)
    kept = ids[present]
    header_bytes = [np.full(len(head), MAGIC), *((kept >> shift) & 0xFF for shift in (24, 16, 8, 0))]
    for i, byte in enumerate(header_bytes):
        out[head + i] = byte
        header[head + i] = True
    out[~header] = data[_covered(len(data), offsets[:-1][present], offsets[1:][present])]
    validity = None if present.all() else pa.py_buffer(np.packbits(present, bitorder="little"))
    return pa.BinaryArray.from_buffers(
        pa.binary(), n, [validity, pa.py_buffer(_int32_offsets(out_offsets)), pa.py_buffer(out)])


def _covered(size: int, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """A mask of ``size`` bytes, true inside the ranges ``[starts[i], ends[i])`` (ascending and
    apart, as a column's values are): one byte per byte, whatever the number of ranges."""
    marks = np.zeros(size + 1, np.int8)
    nonempty = ends > starts
    np.add.at(marks, starts[nonempty], 1)
    np.add.at(marks, ends[nonempty], -1)
    return np.cumsum(marks[:-1], dtype=np.int8) > 0


def _int32_offsets(offsets: np.ndarray) -> np.ndarray:
    """Arrow binary offsets, refusing a column past 2 GiB rather than wrapping them."""
    if len(offsets) and offsets[-1] > np.iinfo(np.int32).max:
        raise ValueError(f"{offsets[-1]} bytes are more than one binary column holds (2 GiB)")
    return offsets.astype(np.int32)
