"""A naive reference: keeps every event, loops in Python. For tests only — slow by design.

``reference_windows(events, window, aggs)`` with ``events`` a list of
``(key, t_us, {column: value})`` returns ``{(key, start_us, end_us): {name: result}}``
for the built-in operations of :mod:`.ops`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping

from jetspark.windowing import ops
from jetspark.windowing.aggregate_operation import AggregateOperation
from jetspark.windowing.definitions import SessionWindow, SlidingWindow, WindowDefinition

Event = tuple[object, int, Mapping[str, float | None]]


def _values(rows: list[Event], column: str) -> list[float]:
    return [float(r[2][column]) for r in rows if r[2].get(column) is not None]


def naive_result(op: AggregateOperation, rows: list[Event]) -> object:
    """The result of a built-in operation over ``rows``, computed the obvious way."""
    if isinstance(op, ops.Count):
        return len(rows) if not op.inputs else len(_values(rows, op.inputs[0]))
    if isinstance(op, ops.CollectSorted):
        col = op.inputs[1]
        pairs = sorted((r[1], float(r[2][col])) for r in rows if r[2].get(col) is not None)
        return [v for _, v in pairs]
    if isinstance(op, ops.LinearSlope):
        x_col, y_col = op.inputs
        pts = [
            (float(r[2][x_col]), float(r[2][y_col]))
            for r in rows
            if r[2].get(x_col) is not None and r[2].get(y_col) is not None
        ]
        n = len(pts)
        if n < 2:
            return None
        mx = sum(p[0] for p in pts) / n
        my = sum(p[1] for p in pts) / n
        sxx = sum((p[0] - mx) ** 2 for p in pts)
        sxy = sum((p[0] - mx) * (p[1] - my) for p in pts)
        if sxx <= 0:
            return None
        slope = sxy / sxx
        return slope if not isinstance(op, ops.LinearIntercept) else my - slope * mx
    xs = _values(rows, op.inputs[0])
    if not xs:
        return None
    if isinstance(op, ops.Mean):
        return math.fsum(xs) / len(xs)
    if isinstance(op, ops.Sum):
        return math.fsum(xs)
    if isinstance(op, ops.Max):
        return max(xs)
    if isinstance(op, ops.Min):
        return min(xs)
    if isinstance(op, ops.Variance):  # sample (ddof 1) or population (ddof 0)
        if len(xs) <= op.ddof:
            return None
        m = math.fsum(xs) / len(xs)
        var = math.fsum((x - m) ** 2 for x in xs) / (len(xs) - op.ddof)
        return math.sqrt(var) if isinstance(op, ops.StdDev) else var
    raise TypeError(f"no naive reference for {op!r}")


def _assign(events: list[Event], window: WindowDefinition) -> dict[tuple, list[Event]]:
    groups: dict[tuple, list[Event]] = defaultdict(list)
    if isinstance(window, SlidingWindow):
        size, slide = window.size_us, window.slide_us
        for ev in events:
            key, t, _ = ev
            start = t - (t % slide)
            while start > t - size:
                groups[(key, start, start + size)].append(ev)
                start -= slide
        return groups
    assert isinstance(window, SessionWindow)
    by_key: dict[object, list[Event]] = defaultdict(list)
    for ev in events:
        by_key[ev[0]].append(ev)
    for key, evs in by_key.items():
        evs.sort(key=lambda e: e[1])
        cur: list[Event] = []
        for ev in evs:
            if cur and ev[1] > cur[-1][1] + window.timeout_us:
                groups[(key, cur[0][1], cur[-1][1] + window.timeout_us)] = cur
                cur = []
            cur.append(ev)
        if cur:
            groups[(key, cur[0][1], cur[-1][1] + window.timeout_us)] = cur
    return groups


def reference_windows(
    events: list[Event], window: WindowDefinition, aggs: Mapping[str, AggregateOperation]
) -> dict[tuple, dict[str, object]]:
    """Every non-empty window with its aggregate results."""
    return {
        w: {name: naive_result(op, rows) for name, op in aggs.items()}
        for w, rows in _assign(events, window).items()
    }
