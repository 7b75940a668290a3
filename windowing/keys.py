"""Vectorized grouping: dense integer codes for key columns and (code, position) pairs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa


def key_codes(table: pa.Table, keys: tuple[str, ...]) -> np.ndarray:
    """One int64 code per row; equal codes ⇔ equal key tuples (null is a value)."""
    codes = None
    for name in keys:
        col = table.column(name)
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        enc = col.dictionary_encode(null_encoding="encode")
        c = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        n = len(enc.dictionary)
        codes = c if codes is None else codes * n + c
        if len(keys) > 1:
            codes, _ = pd.factorize(codes)
            codes = codes.astype(np.int64)
    return codes if codes is not None else np.zeros(table.num_rows, np.int64)


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
    else:
        bc, _ = pd.factorize(b)
        combined = a * (int(bc.max()) + 1) + bc
    gid, uniq = pd.factorize(combined)
    gid = gid.astype(np.int64)
    running = np.maximum.accumulate(gid)
    first = np.flatnonzero(np.r_[True, gid[1:] > running[:-1]])
    return gid, len(uniq), first
