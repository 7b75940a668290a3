"""Session windows, vectorized (Jet semantics).

Each event at ``t`` covers the closed interval ``[t, t + timeout]``; a session is a
maximal union of overlapping intervals of one key, so an event extends a session,
creates one, or merges two. Touching intervals merge (as in Spark's ``session_window``).
A session is ``[start, end)`` with ``end = last event + timeout``.
"""

from __future__ import annotations

import numpy as np

from jetspark.windowing.aggregate_operation import Acc, AggregateOperation
from jetspark.windowing.kernels import reduce_groups, take


def merge_sessions(
    ops: tuple[AggregateOperation, ...],
    accs: list[Acc],
    kc: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    changed: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[Acc], np.ndarray | None]:
    """Merge overlapping (partial) sessions per key.

    Returns (first source row of each merged session, key code, start, end, accs, changed),
    sorted by key code then start; ``changed`` (early results: a flag per input session) is
    true for a merged session when any of its parts was, None when not given.
    """
    n = len(kc)
    if n == 0:
        z = np.zeros(0, np.int64)
        return z, z, z, z, [op.create(0) for op in ops], None if changed is None else np.zeros(0, bool)
    import pandas as pd  # here only: a worker that runs sliding windows never loads it

    order = np.lexsort((start, kc))
    kc, start, end = kc[order], start[order], end[order]
    reach = pd.Series(end).groupby(kc).cummax().to_numpy()
    new = np.r_[True, (kc[1:] != kc[:-1]) | (start[1:] > reach[:-1])]
    gid = np.cumsum(new) - 1
    heads = np.flatnonzero(new)
    ng = len(heads)
    s_end = np.maximum.reduceat(end, heads)
    merged = [reduce_groups(op, take(acc, order), gid, ng) for op, acc in zip(ops, accs, strict=True)]
    flags = None if changed is None else np.logical_or.reduceat(changed[order], heads)
    return order[heads], kc[heads], start[heads], s_end, merged, flags


def event_sessions(
    kc: np.ndarray, t: np.ndarray, timeout: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Group raw events into sessions.

    Returns (sort order, session id per sorted event, index of each session's first
    sorted event, start, end).
    """
    order = np.lexsort((t, kc))
    kc_s, t_s = kc[order], t[order]
    new = np.r_[True, (kc_s[1:] != kc_s[:-1]) | (t_s[1:] > t_s[:-1] + timeout)]
    gid = np.cumsum(new) - 1
    heads = np.flatnonzero(new)
    last = np.r_[heads[1:] - 1, len(t_s) - 1]
    return order, gid, heads, t_s[heads], t_s[last] + timeout
