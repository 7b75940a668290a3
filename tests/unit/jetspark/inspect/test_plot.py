"""The watermark picture shows what it claims: one line per partition in its own colour across
the plot (not only the legend's sample), and the thick grey W line; a picture of batches
without partitions has none of them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jetspark.inspect import Report
from jetspark.inspect.checkpoint import read_checkpoint
from tests.unit.jetspark.inspect.test_inspect import T, kafka_offset, write_checkpoint

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
    """What a test of ``--plot`` / ``Report.plot`` asserts about the PNG."""
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rgb = pixels(png)
    height, width, _ = rgb.shape
    assert 700 <= width <= 950 and 380 <= height <= 520  # 9 x 5 in at 100 dpi, trimmed
    for p in range(partitions):
        assert count(rgb, TAB10[p]) > LINE_PIXELS, f"partition {p}'s line is missing"
    for p in range(partitions, len(TAB10)):
        assert count(rgb, TAB10[p]) == 0, f"a line for partition {p}, which does not exist"
    assert count(rgb, W_GREY) > W_PIXELS, "the W line is missing"


def spread(offset: dict) -> dict:
    """The fixture's offset with each partition's wm 20 s apart, so no line hides another."""
    for p, mark in offset["partitions"]["orders"].items():
        mark["wm"] += 20_000 * int(p)
    return offset


def test_the_picture_has_a_line_per_partition_and_w(tmp_path):
    root = write_checkpoint(tmp_path / "cp", {b: [spread(kafka_offset(b, idle3=b >= 2))] for b in range(5)},
                            commits=[0, 1, 2, 3])
    check_watermark_picture(Report(read_checkpoint(str(root)), T).plot(tmp_path / "w.png"), partitions=4)


def test_a_picture_without_partitions_has_no_lines(tmp_path):
    root = write_checkpoint(tmp_path / "cp", {b: [{"other": b}] for b in range(3)}, commits=[0, 1, 2])
    rgb = pixels(Report(read_checkpoint(str(root)), T).plot(tmp_path / "w.png"))
    assert all(count(rgb, c) == 0 for c in TAB10) and count(rgb, W_GREY) < W_PIXELS
