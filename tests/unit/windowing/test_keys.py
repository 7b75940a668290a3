"""Group ids of (key code, frame) pairs: distinct pairs take the counting shortcut, with the
same ids, count and first rows as the hash-table path."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from jetspark.windowing.keys import pair_groups


def _naive(a: np.ndarray, b: np.ndarray) -> tuple[list[int], int, list[int]]:
    ids: dict[tuple[int, int], int] = {}
    gid, first = [], []
    for i, pair in enumerate(zip(a.tolist(), b.tolist(), strict=True)):
        if pair not in ids:
            ids[pair] = len(ids)
            first.append(i)
        gid.append(ids[pair])
    return gid, len(ids), first


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(-5, 40)), min_size=1, max_size=80), st.booleans())
def test_pair_groups_equals_first_appearance_numbering(pairs, distinct) -> None:
    if distinct:
        pairs = list(dict.fromkeys(pairs))
    a = np.array([p[0] for p in pairs], np.int64)
    b = np.array([p[1] for p in pairs], np.int64)
    gid, ng, first = pair_groups(a, b)
    want_gid, want_ng, want_first = _naive(a, b)
    assert (gid.tolist(), ng, first.tolist()) == (want_gid, want_ng, want_first)


def test_distinct_pairs_number_rows_in_order() -> None:
    a, b = np.array([3, 0, 3, 1], np.int64), np.array([7, 7, 8, 7], np.int64)
    gid, ng, first = pair_groups(a, b)
    assert gid.tolist() == [0, 1, 2, 3] and ng == 4 and first.tolist() == [0, 1, 2, 3]
    assert pd.Series(gid).is_unique
