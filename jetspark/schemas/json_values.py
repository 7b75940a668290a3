"""JSON documents into a typed Arrow column, a batch at a time: ``value.format=json-schema``.

The payloads are joined into newline-delimited JSON (a raw line break can only be white space
in JSON, so each payload's own become spaces) and read by Arrow's JSON reader with the
column's type as its explicit schema: one vectorized parse per batch, no Python call per
record. A document that does not fit — not JSON, not one object, a value of another type than
its field's — fails the whole parse; the batch is then split in halves until the documents
that fail are alone, and those are the malformed ones, each with Arrow's reason. Fields the
schema does not name are ignored; fields a document leaves out are null.
"""

from __future__ import annotations

import functools
import io

import numpy as np
import pyarrow as pa
import pyarrow.json as pj

_WHITE = np.array([9, 10, 13, 32], np.uint8)
_ALONE = 16
"""Ranges this small are parsed one document at a time after a failure."""


def decode(payloads: pa.BinaryArray, keep: np.ndarray, out_type: pa.StructType
           ) -> tuple[pa.Array, np.ndarray, list[str]]:
    """The documents of ``payloads`` at the rows where ``keep`` is true, typed ``out_type``
    (null elsewhere and where a document did not decode), and the rows that did not decode
    with why (ascending)."""
    n = len(payloads)
    rows = np.flatnonzero(keep)
    kept = payloads.take(pa.array(rows)) if len(rows) < n else payloads
    text, offsets = ndjson(kept)
    blank = _non_white_counts(text, offsets) == 0
    bad_rows: list[np.ndarray] = [rows[blank]]
    bad_texts: list[str] = ["an empty document"] * int(blank.sum())
    parsed = _Parser(text, offsets, out_type)
    pieces: list[tuple[int, pa.Array]] = []
    for lo, hi in _runs(~blank):
        parsed.ranges(lo, hi, pieces)
    bad_rows.append(rows[np.array(parsed.bad, np.int64)])
    bad_texts.extend(parsed.reasons)
    position = np.full(n, -1, np.int64)
    arrays = []
    at = 0
    for lo, array in pieces:
        position[rows[lo:lo + len(array)]] = np.arange(at, at + len(array))
        arrays.append(array)
        at += len(array)
    decoded = _placed(arrays, position, out_type)
    bad = np.concatenate(bad_rows)
    order = np.argsort(bad, kind="stable")
    return decoded, bad[order], [bad_texts[i] for i in order]


def ndjson(payloads: pa.BinaryArray) -> tuple[np.ndarray, np.ndarray]:
    """The payloads as newline-delimited JSON, what Arrow's JSON reader reads, and where each
    line starts (``n + 1`` offsets, each line ending with its newline). A payload's own line
    breaks become spaces: in valid JSON they can only be white space. A null payload is an
    empty line, which Arrow skips: callers keep null and blank payloads out, or count rows."""
    n = len(payloads)
    if n == 0:
        return np.zeros(0, np.uint8), np.zeros(1, np.int64)
    payloads = pa.concat_arrays([payloads]) if payloads.offset else payloads  # offsets from 0
    _validity, offsets_buf, data_buf = payloads.buffers()
    offsets = np.frombuffer(offsets_buf, np.int32, n + 1).astype(np.int64)
    offsets -= offsets[0]
    body = (np.frombuffer(data_buf, np.uint8, offsets[-1], int(np.frombuffer(offsets_buf, np.int32, 1)[0]))
            if data_buf is not None else np.zeros(0, np.uint8))
    text = np.empty(len(body) + n, np.uint8)
    line_ends = offsets[1:] + np.arange(n)
    is_body = np.ones(len(text), bool)
    is_body[line_ends] = False
    text[is_body] = np.where((body == 10) | (body == 13), np.uint8(32), body)
    text[line_ends] = 10
    return text, offsets + np.arange(n + 1)


def _non_white_counts(text: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """How many bytes of each line are not white space."""
    non_white = np.concatenate([[0], np.cumsum(~np.isin(text, _WHITE), dtype=np.int64)])
    return non_white[offsets[1:]] - non_white[offsets[:-1]]


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """The [lo, hi) ranges where ``mask`` is true."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    return [(int(lo), int(hi)) for lo, hi in zip(edges[::2], edges[1::2], strict=True)]


class _Parser:
    """Parses ranges of lines, halving a range that fails until the failing lines are alone."""

    def __init__(self, text: np.ndarray, offsets: np.ndarray, out_type: pa.StructType) -> None:
        self.text, self.offsets, self.out_type = text, offsets, out_type
        self.read_type = _as_read(out_type)
        self.bad: list[int] = []
        self.reasons: list[str] = []

    def ranges(self, lo: int, hi: int, pieces: list[tuple[int, pa.Array]]) -> None:
        try:
            pieces.append((lo, self._parse(lo, hi)))
            return
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, _Count) as e:
            if hi - lo == 1:
                self.bad.append(lo)
                self.reasons.append(_reason(e))
                return
        if hi - lo <= _ALONE:
            for i in range(lo, hi):
                self.ranges(i, i + 1, pieces)
            return
        mid = (lo + hi) // 2
        self.ranges(lo, mid, pieces)
        self.ranges(mid, hi, pieces)

    def _parse(self, lo: int, hi: int) -> pa.Array:
        start, end = int(self.offsets[lo]), int(self.offsets[hi])
        block = max(1 << 20, min(end - start + 1, 2**31 - 1))
        table = pj.read_json(
            io.BytesIO(self.text[start:end].tobytes()),
            read_options=pj.ReadOptions(use_threads=False, block_size=block),
            parse_options=pj.ParseOptions(explicit_schema=pa.schema(list(self.read_type)),
                                          unexpected_field_behavior="ignore"))
        if table.num_rows != hi - lo:
            raise _Count("not one JSON object" if hi - lo == 1 else "")
        array = pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns],
                                           fields=list(self.read_type))
        return array.cast(self.out_type) if self.read_type != self.out_type else array


class _Count(Exception):
    """A range's lines read as another number of rows: some line is not one object."""


def _reason(error: Exception) -> str:
    text = str(error).replace(" in row 0", "")
    return text if isinstance(error, _Count) else f"does not fit the schema: {text}"


@functools.lru_cache(maxsize=64)
def _as_read(t: pa.DataType) -> pa.DataType:
    """``t`` with dates as strings: Arrow's JSON reader reads timestamps, not dates; the
    strings are cast to dates after the parse (ISO 8601 ``YYYY-MM-DD``)."""
    if pa.types.is_date(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _as_read(f.type), f.nullable) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(pa.field(t.value_field.name, _as_read(t.value_type), t.value_field.nullable))
    return t


def _placed(arrays: list[pa.Array], position: np.ndarray, out_type: pa.DataType) -> pa.Array:
    """The decoded arrays put at their rows (``position``: index into their concatenation, or
    -1 for a null row)."""
    n = len(position)
    if not arrays:
        return pa.nulls(n, out_type)
    decoded = pa.concat_arrays(arrays) if len(arrays) > 1 else arrays[0]
    if len(decoded) == n and (position >= 0).all():
        return decoded
    return decoded.take(pa.array(position, mask=position < 0))

