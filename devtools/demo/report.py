"""The demo's bookkeeping: per-batch progress lines, the reference check, the report folder."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from jetspark.devtools.demo.events import Record
from jetspark.inspect.plot import plot_watermarks
from jetspark.listener import observed_metrics

WINDOW, SLIDE = "30 seconds", "10 seconds"


@dataclass(frozen=True)
class Batch:
    """What one micro-batch of the windows query reports."""

    batch_id: int
    rows: int
    late: int
    watermark: int | None  # the source's coalesced W after the batch, epoch ms
    spark_watermark_ms: int  # Spark's event-time watermark in effect for the batch
    partitions: dict[str, dict] = field(default_factory=dict)  # "p" -> {"wm", "idle", ...}


def iso_ms(text: str | None) -> int:
    """An ISO-8601 instant of a query progress as epoch ms (0 when absent)."""
    if not text:
        return 0
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def batch_of(progress: dict, topic: str, metrics_name: str = "jetkafka") -> Batch:
    """A :class:`Batch` from one ``StreamingQueryProgress`` (as a dict)."""
    end = progress["sources"][0]["endOffset"] or {}
    end = json.loads(end) if isinstance(end, str) else end  # a string in query.lastProgress
    observed = observed_metrics(progress).get(metrics_name, {})
    return Batch(progress["batchId"], int(observed.get("records") or 0),
                 int(observed.get("lateRecords") or 0), end.get("watermark"),
                 iso_ms(progress.get("eventTime", {}).get("watermark")),
                 end.get("partitions", {}).get(topic, {}))


def progress_line(b: Batch, t0_ms: int, slowest: tuple[str, int] | None = None) -> str:
    """``batch 3: 250 rows, 1 late | W +95.0s | slowest p1 45.0 s behind | p0 +140.0s  p1 +95.0s  p3 idle``.

    ``slowest``: the partition holding W back and how far (ms) its wm is behind the leading one's
    (:attr:`jetspark.listener.BatchProgress.slowest`).
    """
    def rel(ms: int | None) -> str:
        return "-" if ms is None else f"+{(ms - t0_ms) / 1000:.1f}s"

    parts = "  ".join(f"p{p} {rel(m.get('wm'))}{' idle' if m.get('idle') else ''}"
                      for p, m in sorted(b.partitions.items(), key=lambda kv: int(kv[0])))
    slow = f"slowest p{slowest[0]} {slowest[1] / 1000:.1f} s behind | " if slowest else ""
    return f"  batch {b.batch_id:>2}: {b.rows:>6} rows, {b.late} late | W {rel(b.watermark)} | {slow}{parts}"


def reference_check(records: list[Record], got: dict[tuple[str, int, int], tuple], until_ms: int,
                    t0_ms: int) -> tuple[bool, int, list[str]]:
    """Compare the table with naive windows of the on-time events ending at or before ``until_ms``.

    The slope is of speed over ``t``, seconds since ``t0_ms`` (a small origin-relative x: the
    slope's zero-variance test scales with mean(x)², so epoch seconds would read as constant).

    ``got`` maps ``(vehicle, start_us, end_us)`` to ``(n, mean_speed, slope)``. Returns (equal,
    number of reference windows, up to 5 differences).
    """
    from jetspark.windowing import ops, sliding
    from jetspark.windowing.reference import reference_windows

    aggs = {"n": ops.count(), "mean_speed": ops.mean("speed"), "slope": ops.linear_trend("t", "speed")}
    events = [(r.vehicle, r.ts * 1000, {"speed": r.speed, "t": (r.ts - t0_ms) / 1000})
              for r in records if r.vehicle is not None and not r.late]
    expected = {k: v for k, v in reference_windows(events, sliding(WINDOW, SLIDE), aggs).items()
                if k[2] <= until_ms * 1000}
    diffs = [f"missing {k}" for k in expected if k not in got]
    diffs += [f"extra {k}" for k in got if k not in expected]
    for k in expected.keys() & got.keys():
        e, (n, mean, slope) = expected[k], got[k]
        if n != e["n"] or not _close(mean, e["mean_speed"]) or not _close(slope, e["slope"]):
            diffs.append(f"{k}: table {(n, mean, slope)} reference {(e['n'], e['mean_speed'], e['slope'])}")
    return not diffs, len(expected), diffs[:5]


def _close(a: float | None, b: float | None) -> bool:
    nan_a = a is None or math.isnan(a)
    nan_b = b is None or math.isnan(b)
    if nan_a or nan_b:
        return nan_a and nan_b
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def write_report(folder: Path, batches: list[Batch], t0_ms: int, summary: list[str]) -> list[Path]:
    """``watermarks.png`` (per-partition and coalesced watermarks per batch) and ``summary.md``."""
    folder.mkdir(parents=True, exist_ok=True)
    png = plot_watermarks(folder / "watermarks.png", batches, t0_ms)
    md = folder / "summary.md"
    rows = "\n".join(f"| {b.batch_id} | {b.rows} | {b.late} | {_rel(b.watermark, t0_ms)} | "
                     + ", ".join(f"p{p} {_rel(m.get('wm'), t0_ms)}{' idle' if m.get('idle') else ''}"
                                 for p, m in sorted(b.partitions.items(), key=lambda kv: int(kv[0])))
                     + " |" for b in batches)
    md.write_text("# jetspark demo\n\n" + "\n".join(f"- {line}" for line in summary)
                  + "\n\n![watermarks](watermarks.png)\n\n| batch | rows | late | W | partitions |\n"
                  "|---|---|---|---|---|\n" + rows + "\n")
    return [png, md]


def _rel(ms: int | None, t0_ms: int) -> str:
    return "-" if ms is None else f"+{(ms - t0_ms) / 1000:.1f}s"
