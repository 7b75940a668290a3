"""The explanation pages' figures, drawn from what jetspark's own code computes on a small input.

    python scripts/doc_pictures.py            # (re)write docs/explanation/*.svg
    python scripts/doc_pictures.py --check    # exit 1 when a committed figure is not what it draws

- ``sliding-window-batches.svg`` (Windows page): three micro-batches of one key through the
  window engine's two stages (``accumulate_events``, then ``combine_to_window.step`` as the
  streaming operator calls it, with each batch's watermark from ``WatermarkTracker``): the
  frames each batch holds, the windows it emits and their counts, and which frames are evicted;
- ``partition-watermarks.svg`` (Watermarks page): ``WatermarkTracker`` over three partitions
  with a driver clock of one second a batch; one partition goes quiet, holds W back until its
  idle timeout, is then left out, and rejoins with records behind W (``late_mask``: late).

The figures are SVG written here (no plotting library, the same bytes on every machine), so a
unit test (tests/unit/test_doc_pictures.py) redraws them and compares.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "explanation"
REFRESH = "python scripts/doc_pictures.py"
S = 1_000_000  # µs per second: the window engine's unit

# --- the runs ---------------------------------------------------------------------------

#: Event times (seconds) of key "v1" in each micro-batch, in arrival order.
BATCH_EVENTS = ((0.3, 0.8, 1.4, 2.2, 2.9), (3.1, 3.5, 2.6, 4.6, 5.2), (5.9, 6.4, 7.7, 8.5))
SIZE_S, SLIDE_S = 3, 1


@dataclass
class WindowBatch:
    """What one micro-batch did, as the engine computed it."""

    events: tuple[float, ...]
    watermark_s: float  # W the batch reached (the source's tracker)
    frames: dict[int, int]  # frame → count, the state merged with the batch's events
    kept: tuple[int, ...]  # the frames kept in state after the batch (the others evicted)
    emitted: list[tuple[float, float, int]]  # (start s, end s, count) of the windows emitted


def sliding_run() -> list[WindowBatch]:
    """``sliding(3 s, 1 s)`` counts of one key over :data:`BATCH_EVENTS`, micro-batch by
    micro-batch, as the streaming operator runs them (stage 1 per batch, then stage 2 with
    Spark's watermark, the previous batch's W, and the batch's own W carried)."""
    from jetspark.datasources.watermarks import Progress, WatermarkPolicy, WatermarkTracker
    from jetspark.windowing import ops, sliding
    from jetspark.windowing.accumulate_by_frame import accumulate_events, merge_partials
    from jetspark.windowing.combine_to_window import step
    from jetspark.windowing.plan import FRAME, Plan

    plan = Plan.build("key", "t", sliding(f"{SIZE_S} seconds", f"{SLIDE_S} seconds"), {"n": ops.count()})
    tracker = WatermarkTracker(WatermarkPolicy(lag_ms=0, idle_timeout_ms=0), clock=lambda: 0)
    marks = tracker.initial(["positions:0"])
    state, emitted_us, spark_wm_us = None, None, 0
    out = []
    for events in BATCH_EVENTS:
        t_us = [round(t * S) for t in events]
        marks = tracker.advance(marks, {"positions:0": Progress(True, max(t_us) // 1000)})
        table = pa.table({"key": ["v1"] * len(t_us),
                          "t": pa.array(t_us, pa.timestamp("us", tz="UTC"))})
        partials = accumulate_events(plan, table)
        held = merge_partials(plan, pa.concat_tables([state, partials]) if state is not None else partials)
        res = step(plan, state, partials, emitted_us, spark_wm_us, carried_us=marks.watermark * 1000)
        windows = res.output.to_pydict()
        out.append(WindowBatch(
            events, marks.watermark / 1000,
            dict(zip(held.column(FRAME).to_pylist(), _counts(plan, held), strict=True)),
            tuple(res.state.column(FRAME).to_pylist()) if res.state is not None else (),
            [(_s(a), _s(b), n) for a, b, n in zip(windows["window_start"], windows["window_end"],
                                                    windows["n"], strict=True)]))
        state, emitted_us, spark_wm_us = res.state, res.emitted_us, marks.watermark * 1000
    return out


def _counts(plan, table: pa.Table) -> list[int]:
    """The count accumulator of each partial row."""
    return [int(v) for v in np.asarray(plan.accs_from_table(table)[0][0])]


def _s(ts) -> float:
    return ts.timestamp()


PARTITIONS = 3
LAG_S, IDLE_S = 1, 3


def _news(batch: int) -> dict[int, tuple[float, ...]]:
    """The event times each partition brings in batch ``batch`` (one batch a second)."""
    news = {0: (batch + 1.6,), 1: (batch + 1.2,)}
    if batch < 4:
        news[2] = (batch + 1.1,)
    if batch == 10:
        news[2] = (7.5, 8.3, 10.8)  # back after its quiet spell: two of them behind W
    return news


BATCHES = 15


@dataclass
class WatermarkBatch:
    clock_s: int
    wm: dict[int, float | None]  # wm[p] (s)
    idle: dict[int, bool]
    watermark_s: float | None  # W
    records: dict[int, tuple[float, ...]]
    late: dict[int, tuple[bool, ...]]


def watermark_run() -> list[WatermarkBatch]:
    """``WatermarkTracker`` with ``watermark.lag`` 1 s and ``watermark.idleTimeout`` 3 s over
    :func:`_news`, one batch a second of driver clock; ``late_mask`` flags each batch's
    records against the W the batch started with."""
    from jetspark.datasources.watermarks import Progress, WatermarkPolicy, WatermarkTracker, late_mask

    clock = [0]
    tracker = WatermarkTracker(WatermarkPolicy(lag_ms=LAG_S * 1000, idle_timeout_ms=IDLE_S * 1000),
                               clock=lambda: clock[0])
    keys = [f"orders:{p}" for p in range(PARTITIONS)]
    state = tracker.initial(keys)
    out = []
    for batch in range(BATCHES):
        clock[0] = batch * 1000
        news = _news(batch)
        w_prev = state.watermark
        late = {}
        for p, times in news.items():
            ts = np.array([round(t * 1000) for t in times], dtype=np.int64)
            late[p] = tuple(bool(x) for x in late_mask(ts, state.partitions[keys[p]].max_ts, w_prev)[0])
        progress = {keys[p]: Progress(True, round(max(t) * 1000)) for p, t in news.items()}
        state = tracker.advance(state, progress)
        lag = tracker.policy.lag_ms
        out.append(WatermarkBatch(
            batch, {p: _ms(state.wm(keys[p], lag)) for p in range(PARTITIONS)},
            {p: state.partitions[keys[p]].idle for p in range(PARTITIONS)},
            _ms(state.watermark), news, late))
    return out


def _ms(value: int | None) -> float | None:
    return None if value is None else value / 1000


# --- SVG ------------------------------------------------------------------------------------

COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd")
GREY, LIGHT, INK = "#8c8c8c", "#e6e6e6", "#222222"


class Svg:
    """A few SVG elements, written with fixed precision so the bytes do not vary."""

    def __init__(self, width: int, height: int, title: str) -> None:
        self.parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                      f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" '
                      f'font-size="12">',
                      f"<title>{_esc(title)}</title>",
                      f'<rect width="{width}" height="{height}" fill="#ffffff"/>']

    def line(self, x1, y1, x2, y2, colour=INK, width=1.0, dash: str = "") -> None:
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
                          f'stroke="{colour}" stroke-width="{width:.1f}"{extra}/>')

    def rect(self, x, y, w, h, fill, stroke="none", opacity=1.0, dash: str = "") -> None:
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}" '
                          f'stroke="{stroke}" fill-opacity="{opacity:.2f}"{extra}/>')

    def circle(self, x, y, r, fill, stroke="none") -> None:
        self.parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{fill}" stroke="{stroke}"/>')

    def cross(self, x, y, r, colour) -> None:
        self.line(x - r, y - r, x + r, y + r, colour, 2)
        self.line(x - r, y + r, x + r, y - r, colour, 2)

    def polyline(self, points, colour, width=2.0, dash: str = "") -> None:
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        xy = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        self.parts.append(f'<polyline points="{xy}" fill="none" stroke="{colour}" '
                          f'stroke-width="{width:.1f}"{extra}/>')

    def text(self, x, y, text, anchor="start", colour=INK, size=12, weight="normal") -> None:
        self.parts.append(f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="{colour}" '
                          f'font-size="{size}" font-weight="{weight}">{_esc(text)}</text>')

    def __str__(self) -> str:
        return "\n".join([*self.parts, "</svg>"]) + "\n"


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def sliding_svg(run: list[WindowBatch]) -> str:
    t0, t1 = -2, 10  # the time axis, s: the first window starts 2 s before the first event
    left, right, unit = 150, 220, 48
    width = left + (t1 - t0) * unit + right
    x = lambda t: left + (t - t0) * unit  # noqa: E731
    height = 66 + sum(44 + 22 * max(1, len(b.emitted)) + 36 for b in run) + 54
    svg = Svg(width, height, f"sliding({SIZE_S} s, {SLIDE_S} s) counts of one key, batch by batch")
    svg.text(10, 20, f"window_aggregate(…, window=sliding(\"{SIZE_S} seconds\", \"{SLIDE_S} second\"), "
             "aggs={\"n\": ops.count()}) on a stream", weight="bold")
    svg.text(10, 36, "one key, three micro-batches; frame f holds the events of [f s, f + 1 s)", colour=GREY)
    axis = height - 58
    for t in range(t0, t1 + 1):  # frame boundaries and the axis
        svg.line(x(t), 54, x(t), axis, LIGHT)
        svg.text(x(t), axis + 14, f"{t} s", "middle", GREY, 11)
    for f in range(t0, t1):
        svg.text(x(f + 0.5), 50, f"frame {f}", "middle", GREY, 10)
    y = 66
    for i, b in enumerate(run):
        colour = COLOURS[i]
        svg.text(10, y + 14, f"micro-batch {i}", weight="bold", colour=colour)
        for t in b.events:  # the events, in their frames
            svg.circle(x(t), y + 10, 4, colour)
        svg.line(x(b.watermark_s), y - 4, x(b.watermark_s), y + 22 * (2 + max(1, len(b.emitted))) - 4,
                 colour, 1.5, "5,3")
        svg.text(x(b.watermark_s) + 4, y + 4, f"W = {b.watermark_s:g} s", colour=colour, size=11)
        y += 22
        svg.text(10, y + 14, "frames held", colour=GREY)
        for f, n in sorted(b.frames.items()):  # the state merged with the batch's events
            kept = f in b.kept
            svg.rect(x(f) + 2, y + 2, unit - 4, 18, colour if kept else LIGHT,
                     INK if kept else GREY, 0.25 if kept else 1.0, "" if kept else "3,2")
            svg.text(x(f + 0.5), y + 15, str(n), "middle", INK if kept else GREY, 11)
        y += 22
        svg.text(10, y + 14, "windows emitted", colour=GREY)
        if not b.emitted:
            svg.text(x(t0) + 4, y + 14, "none", colour=GREY)
        for w, (start, end, n) in enumerate(b.emitted):
            svg.rect(x(start) + 2, y + 3, (end - start) * unit - 4, 16, colour, colour, 0.6)
            how = how_counted(b, w)
            svg.text(x(t1) + 8, y + 15, f"[{start:g} s, {end:g} s): n = {n} = {how}", colour=INK, size=11)
            y += 22
        y += 22 * (not b.emitted) + 36
    for i, line in enumerate((
            "Dots: the events a micro-batch brings; dashed line: the W it reached. 2.6 s is late (behind "
            "W = 2.9 s), but its windows are open: it counts.",
            "Frames: the state with the batch's events; dashed frames are evicted after it. A window is "
            "emitted once, by the micro-batch whose W reaches its end:",
            "the first of a batch adds its frames, each next one is the previous minus the frame that leaves "
            "plus the frame that enters (count's exact deduct).")):
        svg.text(10, height - 34 + i * 14, line, colour=GREY, size=11)
    return str(svg)


def how_counted(b: WindowBatch, w: int) -> str:
    """How the engine's count of the ``w``-th window the batch emits follows from the frames
    it holds: the first window adds its frames; each next one deducts the frame that leaves
    from the previous window and adds the frame that enters (Jet's "previous − trailing frame +
    leading frame")."""
    start, end, _ = b.emitted[w]
    if w == 0:
        return " + ".join(str(b.frames.get(f, 0)) for f in range(int(start), int(end)))
    before = b.emitted[w - 1][2]
    return f"{before} − {b.frames.get(int(start) - SLIDE_S, 0)} + {b.frames.get(int(end) - SLIDE_S, 0)}"


def watermark_svg(run: list[WatermarkBatch]) -> str:
    left, right, top, bottom, per_batch, per_s = 60, 210, 56, 50, 48, 26
    width = left + (len(run) - 1) * per_batch + right + 20
    lo, hi = 0, 16
    height = top + (hi - lo) * per_s + bottom
    x = lambda b: left + 10 + b * per_batch  # noqa: E731
    y = lambda s: top + (hi - s) * per_s  # noqa: E731
    svg = Svg(width, height, "Per-partition watermarks and the coalesced W, with an idle partition")
    svg.text(10, 20, f"Three partitions, watermark.lag = {LAG_S} s, watermark.idleTimeout = {IDLE_S} s, "
             "one micro-batch a second of driver clock", weight="bold")
    svg.text(10, 36, "Partition 2 goes quiet after micro-batch 3 and comes back in micro-batch 10 with "
             "records behind W", colour=GREY)
    for s in range(lo, hi + 1, 2):
        svg.line(left, y(s), x(len(run) - 1) + 10, y(s), LIGHT)
        svg.text(left - 6, y(s) + 4, f"{s} s", "end", GREY, 11)
    for b in run:
        svg.text(x(b.clock_s), height - bottom + 18, str(b.clock_s), "middle", GREY, 11)
    svg.text((left + x(len(run) - 1)) / 2, height - 10, "micro-batch (driver clock, s)", "middle", GREY, 11)
    svg.text(left + 6, top + 14, "event time", colour=GREY, size=11)
    for b in run:  # idle spells, shaded
        if b.idle[2]:
            svg.rect(x(b.clock_s) - per_batch / 2, top, per_batch, (hi - lo) * per_s, LIGHT, opacity=0.6)
    ws = [(x(b.clock_s), y(b.watermark_s)) for b in run if b.watermark_s is not None]
    svg.polyline(_steps(ws), "#000000", 6, "")
    svg.parts[-1] = svg.parts[-1].replace('stroke-width="6.0"', 'stroke-width="6.0" stroke-opacity="0.25"')
    for p in range(PARTITIONS):
        points = [(x(b.clock_s), y(b.wm[p])) for b in run if b.wm[p] is not None]
        svg.polyline(_steps(points), COLOURS[p], 2)
        for b in run:
            for t, late in zip(b.records.get(p, ()), b.late.get(p, ()), strict=True):
                if late:
                    svg.cross(x(b.clock_s), y(t), 4, COLOURS[p])
                else:
                    svg.circle(x(b.clock_s), y(t), 2.5, COLOURS[p])
    legend_x, legend_y = x(len(run) - 1) + 28, top + 10
    entries = [(COLOURS[p], f"wm[{p}] = max_ts − lag") for p in range(PARTITIONS)]
    for i, (colour, label) in enumerate(entries):
        svg.line(legend_x, legend_y + i * 18, legend_x + 18, legend_y + i * 18, colour, 2)
        svg.text(legend_x + 22, legend_y + i * 18 + 4, label, size=11)
    n = len(entries)
    svg.line(legend_x, legend_y + n * 18, legend_x + 18, legend_y + n * 18, "#bfbfbf", 6)
    svg.text(legend_x + 22, legend_y + n * 18 + 4, "W (coalesced)", size=11)
    svg.circle(legend_x + 9, legend_y + (n + 1) * 18, 2.5, INK)
    svg.text(legend_x + 22, legend_y + (n + 1) * 18 + 4, "a record", size=11)
    svg.cross(legend_x + 9, legend_y + (n + 2) * 18, 4, INK)
    svg.text(legend_x + 22, legend_y + (n + 2) * 18 + 4, "a late record", size=11)
    svg.rect(legend_x, legend_y + (n + 3) * 18 - 7, 18, 14, LIGHT, opacity=0.6)
    svg.text(legend_x + 22, legend_y + (n + 3) * 18 + 4, "partition 2 idle", size=11)
    return str(svg)


def _steps(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """A step line: each value holds until the next batch."""
    out: list[tuple[float, float]] = []
    for i, (px, py) in enumerate(points):
        if i:
            out.append((px, out[-1][1]))
        out.append((px, py))
    return out


def pictures() -> dict[Path, str]:
    """Each figure's path and the SVG it draws now."""
    return {OUT / "sliding-window-batches.svg": sliding_svg(sliding_run()),
            OUT / "partition-watermarks.svg": watermark_svg(watermark_run())}


def main(argv: list[str]) -> int:
    stale = [path for path, svg in pictures().items() if not path.exists() or path.read_text() != svg]
    if "--check" in argv:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is not what it draws: run {REFRESH}")
        return 1 if stale else 0
    for path, svg in pictures().items():
        if path in stale:
            path.write_text(svg)
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
