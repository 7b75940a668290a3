"""The explanation pages' figures (scripts/doc_pictures.py) are what the code computes: the
committed SVGs are what the generator draws now, and what it draws is the window engine's
and the watermark tracker's output, checked here against the naive reference and the rules."""

from __future__ import annotations

import importlib.util
import sys

from tests import readme


def _pictures():
    spec = importlib.util.spec_from_file_location("doc_pictures", readme.ROOT / "scripts" / "doc_pictures.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_committed_figures_are_what_the_generator_draws():
    pictures = _pictures()
    stale = [str(path.relative_to(readme.ROOT)) for path, svg in pictures.pictures().items()
             if not path.exists() or path.read_text() != svg]
    assert stale == [], f"{stale} differ from what they draw now: run {pictures.REFRESH} and commit them"


def test_pages_show_the_figures():
    for page, figure in (("windows.md", "sliding-window-batches.svg"),
                         ("watermarks.md", "partition-watermarks.svg")):
        assert f"]({figure})" in (readme.ROOT / "docs" / "explanation" / page).read_text(), page


def test_sliding_figure_windows_are_the_reference_windows():
    """Each window emitted is emitted once, with the naive reference's count over all events,
    by the first micro-batch whose W reaches its end; the arithmetic printed beside it holds."""
    from jetspark.windowing import ops, sliding
    from jetspark.windowing.reference import reference_windows

    pictures = _pictures()
    run = pictures.sliding_run()
    s = pictures.S
    events = [("v1", round(t * s), {}) for b in pictures.BATCH_EVENTS for t in b]
    window = sliding(f"{pictures.SIZE_S} seconds", f"{pictures.SLIDE_S} seconds")
    reference = {(start / s, end / s): r["n"] for (_, start, end), r in
                 reference_windows(events, window, {"n": ops.count()}).items()}
    emitted = [w for b in run for w in b.emitted]
    assert len({(a, b) for a, b, _ in emitted}) == len(emitted)
    assert {(a, b): n for a, b, n in emitted} == {
        w: n for w, n in reference.items() if w[1] <= run[-1].watermark_s}
    previous = float("-inf")
    for b in run:
        assert all(previous < end <= b.watermark_s for _, end, _ in b.emitted)
        previous = b.watermark_s
        for i, (_, _, n) in enumerate(b.emitted):
            assert _value(pictures.how_counted(b, i)) == n


def _value(sum_text: str) -> int:
    """``"6 − 2 + 2"`` → 6."""
    tokens = sum_text.split()
    total = int(tokens[0])
    for sign, number in zip(tokens[1::2], tokens[2::2], strict=True):
        total += int(number) if sign == "+" else -int(number)
    return total


def test_watermark_figure_follows_the_rules():
    """W = max(W_prev, min(wm[p] over the non-idle p)), idle after the timeout without news,
    late = behind the W the batch started with."""
    pictures = _pictures()
    run = pictures.watermark_run()
    w_prev = None
    quiet_since = 0
    for b in run:
        if 2 in b.records:
            quiet_since = b.clock_s
        assert b.idle[2] == (b.clock_s - quiet_since >= pictures.IDLE_S)
        active = [b.wm[p] for p in range(pictures.PARTITIONS) if not b.idle[p]]
        expected = min(active)
        assert b.watermark_s == (expected if w_prev is None else max(w_prev, expected))
        for p, times in b.records.items():
            assert b.late[p] == tuple(w_prev is not None and t < w_prev for t in times)
        w_prev = b.watermark_s
    assert any(b.idle[2] for b in run) and any(any(late) for b in run for late in b.late.values())
