"""The watermark picture: per-partition watermarks (x: idle) and the coalesced W per batch."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from jetspark.errors import JetsparkError


class WatermarkRow(Protocol):
    """One batch as the picture needs it (the demo's batches and inspect's both fit)."""

    batch_id: int
    watermark: int | None  # coalesced W after the batch, epoch ms
    partitions: Mapping[str, Mapping]  # partition label -> {"wm": epoch ms | None, "idle": bool}


def _partition_order(label: str) -> tuple:
    """Partition numbers in numeric order, other labels ("topic:3", a queue's name) after them."""
    return (0, int(label), "") if label.isdigit() else (1, 0, label)


def plot_watermarks(png: Path, batches: Sequence[WatermarkRow], t0_ms: int, *,
                    title: str = "jetkafka watermarks per partition (x: partition idle)",
                    ylabel: str = "event time watermark, s since the stream's start") -> Path:
    """Per-partition watermarks (x: idle) and the coalesced W per batch, seconds after ``t0_ms``."""
    try:
        import matplotlib
    except ImportError:
        raise JetsparkError("drawing watermarks needs matplotlib: pip install 'jetspark[demo]' "
                            "(or pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5))
    xs = [b.batch_id for b in batches]
    names = sorted({p for b in batches for p in b.partitions}, key=_partition_order)
    for p in names:
        ys = [(b.partitions.get(p, {}).get("wm") or math.nan) for b in batches]
        ys = [(y - t0_ms) / 1000 if not math.isnan(y) else math.nan for y in ys]
        line, = ax.plot(xs, ys, marker=".", label=f"partition {p}")
        flags = [b.partitions.get(p, {}).get("idle") for b in batches]
        idle = [(x, y) for x, y, f in zip(xs, ys, flags, strict=True) if f]
        if idle:
            ax.scatter(*zip(*idle, strict=True), marker="x", s=60, color=line.get_color())
    w = [(b.watermark - t0_ms) / 1000 if b.watermark is not None else math.nan for b in batches]
    ax.plot(xs, w, color="black", linewidth=5, alpha=0.35, zorder=0, label="coalesced W (min over non-idle)")
    ax.set_xlabel("micro-batch")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return png
