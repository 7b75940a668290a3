"""Vectorized grouping: dense integer codes for key columns and (code, position) pairs.

pandas (its hash factorization) is imported only on the paths that need it: a Python worker
that runs stage 2 of a static query on distinct single-key cells never loads it.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jetspark.windowing.arrow_numpy import to_numpy


def key_codes(table: pa.Table, keys: tuple[str, ...]) -> np.ndarray:
    """One int64 code per row; equal codes ⇔ equal key tuples (null is a value)."""
    columns = []
    for name in keys:
        col = table.column(name)
        columns.append(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
    return _tuple_codes(columns, table.num_rows)


def _tuple_codes(columns: list[pa.Array], rows: int) -> np.ndarray:
    codes = None
    for col in columns:
        c, n = _column_codes(col)
        codes = c if codes is None else codes * n + c
        if len(columns) > 1:
            codes, _ = _factorize(codes)
            codes = codes.astype(np.int64)
    return codes if codes is not None else np.zeros(rows, np.int64)


def _factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pandas' hash factorization (codes in order of first appearance, the uniques)."""
    import pandas as pd

    return pd.factorize(values)


def _column_codes(col: pa.Array) -> tuple[np.ndarray, int]:
    """Codes of one column and their bound, grouped as Spark groups: -0.0 equals 0.0 and
    NaNs are one; a struct is the tuple of its fields (a null struct apart); a list or map
    goes by its values (per row in Python: such keys are rare)."""
    t = col.type
    if pa.types.is_floating(t):
        col = canonical_floats(col)
    elif pa.types.is_struct(t):
        fields = col.flatten()  # a null struct's fields read as null, whatever they hold
        valid = pc.is_valid(col).to_numpy(zero_copy_only=False).astype(np.int64)
        codes = _tuple_codes([*fields, pa.array(valid)], len(col))
        return codes, int(codes.max()) + 1 if len(codes) else 1
    elif pa.types.is_nested(t):
        texts = np.array([repr(_canonical(v)) for v in col.to_pylist()], dtype=object)
        codes, uniques = _factorize(texts)
        return codes.astype(np.int64), max(len(uniques), 1)
    enc = col.dictionary_encode(null_encoding="encode")
    return to_numpy(enc.indices).astype(np.int64), len(enc.dictionary)


def canonical_floats(col: pa.Array) -> pa.Array:
    """Floats as Spark groups them: -0.0 as 0.0, every NaN as one NaN."""
    t = col.type
    return pc.if_else(pc.is_nan(col), pa.scalar(float("nan"), t), pc.add(col, pa.scalar(0.0, t)))


def canonical_keys(table: pa.Table) -> pa.Table:
    """``table`` with its float columns as :func:`canonical_floats` (the keys a window shows)."""
    for i, f in enumerate(table.schema):
        if pa.types.is_floating(f.type):
            table = table.set_column(i, f, canonical_floats(table.column(i).combine_chunks()))
    return table


def _canonical(value: object) -> object:
    """A nested key value with -0.0 as 0.0 and NaN as one value (for its repr)."""
    if isinstance(value, float):
        return "nan" if value != value else value + 0.0
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_canonical(v) for v in value)
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    return value


#: :func:`pair_groups` first checks whether the pairs are distinct by counting them in an
#: array of at most this many slots per row (the pairs' code range).
DISTINCT_CHECK_SLOTS_PER_ROW = 8


def pair_groups(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, int, np.ndarray]:
    """Dense group ids for the pairs (a[i], b[i]) of int64 arrays, the group count and the
    index of each group's first row (ids are numbered in order of first appearance)."""
    if len(a) == 0:
        return np.zeros(0, np.int64), 0, np.zeros(0, np.int64)
    bmin, bmax = int(b.min()), int(b.max())
    span = bmax - bmin + 1
    amax = int(a.max())
    if (amax + 1) * span < 2**62:
        combined = a * span + (b - bmin)
        # already one row per pair (e.g. cells Spark aggregated): one counting pass instead
        # of a hash table; ids in order of first appearance are then the row numbers
        if (
            (amax + 1) * span <= DISTINCT_CHECK_SLOTS_PER_ROW * len(a)
            and int(a.min()) >= 0
            and np.bincount(combined).max() == 1
        ):
            rows = np.arange(len(a), dtype=np.int64)
            return rows, len(a), rows
    else:
        bc, _ = _factorize(b)
        combined = a * (int(bc.max()) + 1) + bc
    gid, uniq = _factorize(combined)
    gid = gid.astype(np.int64)
    running = np.maximum.accumulate(gid)
    first = np.flatnonzero(np.r_[True, gid[1:] > running[:-1]])
    return gid, len(uniq), first
