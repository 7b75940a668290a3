"""What a test asserts about the watermark picture (``jetspark.inspect.plot.plot_watermarks``,
drawn by ``jetspark inspect --plot`` and by the demo's report): one line per partition in its
own colour across the plot (not only the legend's sample), the thick grey W line, and no line
for a partition that does not exist."""

from __future__ import annotations

from pathlib import Path

import numpy as np

TAB10 = [(0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E), (0x2C, 0xA0, 0x2C), (0xD6, 0x27, 0x28)]
"""Matplotlib's first colours: partitions 0..3 in order."""
W_GREY = (166, 166, 166)
"""Black at alpha 0.35 on white: the coalesced W line."""
LINE_PIXELS = 150
"""A line across 4+ batches covers several hundred pixels; the legend's sample about 30."""
W_PIXELS = 1500
"""The W line is 5 px wide: thousands of pixels; text's anti-aliasing greys, a few hundred."""


def pixels(png: Path) -> np.ndarray:
    import matplotlib.image

    image = matplotlib.image.imread(png)
    return np.round(image[..., :3] * 255).astype(np.int16)


def count(rgb: np.ndarray, colour: tuple[int, int, int], within: int = 3) -> int:
    return int((np.abs(rgb - np.array(colour)).max(axis=-1) <= within).sum())


def check_watermark_picture(png: Path, partitions: int) -> None:
    """What a test of ``--plot``, ``Report.plot`` or the demo's report asserts about the PNG."""
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rgb = pixels(png)
    height, width, _ = rgb.shape
    assert 700 <= width <= 950 and 380 <= height <= 520  # 9 x 5 in at 100 dpi, trimmed
    for p in range(partitions):
        assert count(rgb, TAB10[p]) > LINE_PIXELS, f"partition {p}'s line is missing"
    for p in range(partitions, len(TAB10)):
        assert count(rgb, TAB10[p]) == 0, f"a line for partition {p}, which does not exist"
    assert count(rgb, W_GREY) > W_PIXELS, "the W line is missing"
