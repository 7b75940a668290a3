"""The watermark picture shows what it claims: one line per partition in its own colour across
the plot (not only the legend's sample), and the thick grey W line; a picture of batches
without partitions has none of them."""

from __future__ import annotations

from jetspark.inspect import Report
from jetspark.inspect.checkpoint import read_checkpoint
from tests.pictures import TAB10, W_GREY, W_PIXELS, check_watermark_picture, count, pixels
from tests.unit.jetspark.inspect.test_inspect import T, kafka_offset, write_checkpoint


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
