"""Benchmark plots: each contender's median as a bar, every run as a dot, grouped by case.

A bench calls :func:`runs_chart` beside its report (same folder, same name, ``.png``); the
figures on the documentation's Benchmarks page are such files. Needs matplotlib
(``pip install ".[demo]"``); without it the bench writes its report and says it drew nothing.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

# Spark's contenders in grey, jetspark's in colour: the same contender has the same colour in
# every figure
_SPARK_GREYS = ("#4d4d4d", "#8c8c8c", "#b3b3b3", "#d0d0d0")
_JET_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b")


def _colours(contenders: Sequence[str]) -> dict[str, str]:
    spark = [c for c in contenders if c.startswith("spark")]
    jet = [c for c in contenders if not c.startswith("spark")]
    out = {c: _SPARK_GREYS[i % len(_SPARK_GREYS)] for i, c in enumerate(spark)}
    out |= {c: _JET_COLOURS[i % len(_JET_COLOURS)] for i, c in enumerate(jet)}
    return out


def runs_chart(path: Path, title: str, unit: str, groups: Mapping[str, Mapping[str, Sequence[float]]],
               note: str = "") -> Path | None:
    """Draw ``groups`` (case → contender → the runs' values) as horizontal bars of the medians
    with each run as a dot; ``unit`` labels the axis, ``note`` goes under it (the machine, the
    load). Returns the PNG's path, or None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no plot: matplotlib is not installed (pip install \".[demo]\")")
        return None
    contenders = list(dict.fromkeys(c for runs in groups.values() for c in runs))
    colour = _colours(contenders)
    height = 0.8 / max(len(contenders), 1)
    fig, ax = plt.subplots(figsize=(8, 0.9 + 0.32 * len(groups) * len(contenders) + 0.4 * len(groups)))
    labels_done: set[str] = set()
    for g, runs in enumerate(groups.values()):
        for i, c in enumerate(contenders):
            values = [v for v in runs.get(c, ()) if v == v]  # NaN: a run without the figure
            if not values:
                continue
            y = g + (i - (len(contenders) - 1) / 2) * height
            median = statistics.median(values)
            ax.barh(y, median, height=height * 0.9, color=colour[c],
                    label=None if c in labels_done else c)
            labels_done.add(c)
            ax.plot(values, [y] * len(values), "o", color="black", markersize=3)
            ax.text(max(median, *values), y, f"  {median:.3g}", va="center", fontsize=8)
    ax.set_yticks(range(len(groups)), list(groups))
    ax.invert_yaxis()
    ax.set_xlabel(unit + (f"\n{note}" if note else ""))
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"plot: {path}")
    return path
