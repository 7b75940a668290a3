"""Byte strings, one per row, built a column at a time: what the sink's encoders put together.

A :class:`Ragged` is a column of byte strings as Arrow holds a binary column — offsets and
one data buffer — built with numpy from whole columns (variable-length numbers, fixed-width
values, the rows' own bytes) and joined row by row (:func:`concat`). Nothing loops over rows
in Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from jetspark.schemas.wire import _int32_offsets

_UINT8 = np.uint8


@dataclass(frozen=True)
class Ragged:
    """Row ``i`` is ``data[offsets[i]:offsets[i + 1]]``; the rows lie in order and touch (the
    offsets need not start at 0)."""

    offsets: np.ndarray
    data: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def body(self) -> np.ndarray:
        """The bytes of every row, in order."""
        return self.data[self.offsets[0]:self.offsets[-1]]

    def where(self, keep: np.ndarray) -> Ragged:
        """The rows where ``keep`` is true; the others empty."""
        lengths = self.lengths
        if keep.all():
            return self
        kept = np.where(keep, lengths, 0)
        return Ragged(_offsets(kept), self.body[np.repeat(keep, lengths)])

    def to_arrow(self, valid: np.ndarray | None = None) -> pa.BinaryArray:
        """As an Arrow binary column, null where ``valid`` is false."""
        offsets = _int32_offsets(self.offsets - self.offsets[0])
        validity = (None if valid is None or valid.all()
                    else pa.py_buffer(np.packbits(valid, bitorder="little")))
        return pa.BinaryArray.from_buffers(pa.binary(), len(self),
                                           [validity, pa.py_buffer(offsets), pa.py_buffer(self.body.copy())])


def _offsets(lengths: np.ndarray) -> np.ndarray:
    out = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def empty(n: int) -> Ragged:
    return Ragged(np.zeros(n + 1, np.int64), np.zeros(0, _UINT8))


def constant(raw: bytes, n: int) -> Ragged:
    """The same bytes in every row."""
    return fixed(np.tile(np.frombuffer(raw, _UINT8), (n, 1)) if raw else np.zeros((n, 0), _UINT8))


def fixed(matrix: np.ndarray) -> Ragged:
    """Row ``i`` is ``matrix[i]`` (an (n, width) array of bytes)."""
    n, width = matrix.shape
    return Ragged(np.arange(n + 1, dtype=np.int64) * width, np.ascontiguousarray(matrix, _UINT8).reshape(-1))


def little_endian(values: np.ndarray) -> Ragged:
    """Numbers as their little-endian bytes (Avro's float and double, Protobuf's fixed widths)."""
    values = values.astype(values.dtype.newbyteorder("<"), copy=False)
    return fixed(np.ascontiguousarray(values).view(_UINT8).reshape(len(values), values.dtype.itemsize))


def varints(values: np.ndarray) -> Ragged:
    """Unsigned numbers (uint64) as base-128 variable-length numbers, least significant group
    first (Avro's and Protobuf's)."""
    values = values.astype(np.uint64, copy=False)
    n = len(values)
    count = np.ones(n, np.int64)
    for k in range(1, 10):
        count += values >= np.uint64(1 << (7 * k))
    width = int(count.max()) if n else 1
    shifts = np.arange(width, dtype=np.uint64) * np.uint64(7)
    groups = ((values[:, None] >> shifts) & np.uint64(0x7F)).astype(_UINT8)
    column = np.arange(width)
    groups |= np.where(column < (count[:, None] - 1), _UINT8(0x80), _UINT8(0))
    return Ragged(_offsets(count), groups[column < count[:, None]])


def zigzag(values: np.ndarray) -> np.ndarray:
    """Signed int64 numbers zig-zag mapped to uint64 (Avro's int and long, Protobuf's sint)."""
    values = values.astype(np.int64, copy=False)
    return ((values << np.int64(1)) ^ (values >> np.int64(63))).view(np.uint64)


def of_binary(array: pa.Array) -> Ragged:
    """The bytes of every value of a string or binary column (a null: whatever Arrow holds,
    usually nothing)."""
    if pa.types.is_large_binary(array.type) or pa.types.is_large_string(array.type):
        array = array.cast(pa.binary())
    n = len(array)
    _validity, offsets_buf, data_buf = array.buffers()
    offsets = np.frombuffer(offsets_buf, np.int32, n + 1, array.offset * 4).astype(np.int64)
    data = np.frombuffer(data_buf, _UINT8) if data_buf is not None else np.zeros(0, _UINT8)
    return Ragged(offsets, data)


def lists(items: Ragged, list_offsets: np.ndarray) -> Ragged:
    """Row ``i``: items ``list_offsets[i]`` … ``list_offsets[i + 1] - 1`` joined (no copy)."""
    return Ragged(items.offsets[list_offsets], items.data)


def drop_first(r: Ragged) -> Ragged:
    """Every row without its first byte (an empty row stays empty)."""
    lengths = r.lengths
    keep = np.ones(len(r.body), bool)
    keep[(r.offsets[:-1] - r.offsets[0])[lengths > 0]] = False
    return Ragged(_offsets(np.maximum(lengths - 1, 0)), r.body[keep])


def concat(parts: Sequence[Ragged]) -> Ragged:
    """Row ``i`` of every part, joined in order, as row ``i``."""
    if len(parts) == 1:
        return parts[0]
    lengths = [p.lengths for p in parts]
    offsets = _offsets(np.sum(lengths, axis=0) if lengths else np.zeros(0, np.int64))
    out = np.empty(int(offsets[-1]), _UINT8)
    start = offsets[:-1].copy()
    for part, length in zip(parts, lengths, strict=True):
        body = part.body
        if len(body):
            shift = start - (part.offsets[:-1] - part.offsets[0])
            out[np.repeat(shift, length) + np.arange(len(body))] = body
        start += length
    return Ragged(offsets, out)


# -- Arrow columns as numpy ---------------------------------------------------------------------------

def valid(array: pa.Array) -> np.ndarray:
    """Where ``array`` is not null."""
    if array.null_count == 0:
        return np.ones(len(array), bool)
    return np.asarray(array.is_valid(), dtype=bool)


def numbers(a: pa.Array, dtype) -> np.ndarray:
    """The values as numbers (nulls as 0): days of a date, microseconds of a timestamp."""
    if pa.types.is_date32(a.type):
        a = a.view(pa.int32())
    elif pa.types.is_timestamp(a.type) or pa.types.is_duration(a.type):
        a = a.view(pa.int64())
    elif pa.types.is_boolean(a.type):
        a = a.cast(pa.uint8())
    if a.null_count:
        a = a.fill_null(0)
    return np.asarray(a.to_numpy(zero_copy_only=False)).astype(dtype, copy=False)


def list_offsets(a: pa.Array) -> np.ndarray:
    """A list or map column's offsets into its items (Arrow's, honouring a slice)."""
    return np.asarray(a.offsets, dtype=np.int64)


def list_items(offsets: np.ndarray, size: int, active: np.ndarray, rows: np.ndarray | None
           ) -> tuple[np.ndarray, np.ndarray]:
    """Which items of a list column are written, and the column row of each."""
    lengths = np.diff(offsets)
    item_active = np.zeros(size, bool)
    item_active[offsets[0]:offsets[-1]] = np.repeat(active, lengths)
    item_rows = np.zeros(size, np.int64)
    owners = rows if rows is not None else np.arange(len(lengths))
    item_rows[offsets[0]:offsets[-1]] = np.repeat(owners, lengths)
    return item_active, item_rows


class UnfitRows:
    """An encoding's rows that do not fit their schema: the first reason found for each, by row
    of the column encoded."""

    def __init__(self, unfit: dict[int, str]) -> None:
        self.unfit = unfit

    def mark(self, mask: np.ndarray, rows: np.ndarray | None, why) -> None:
        """Rows where ``mask`` is true are unfit; ``why(i)`` says why (``i``: the row here,
        ``rows[i]`` the column's row; ``rows`` None: the same). No Python call unless one is."""
        if not mask.any():
            return
        for i in np.flatnonzero(mask):
            self.unfit.setdefault(int(rows[i]) if rows is not None else int(i), why(int(i)))
