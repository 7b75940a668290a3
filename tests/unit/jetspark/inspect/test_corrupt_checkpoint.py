"""``jetspark inspect`` on corrupt or foreign checkpoints: a clear error naming the file, exit
code 1, and no exception escaping the command (so no traceback)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jetspark.devtools.cli import main
from jetspark.inspect.checkpoint import CheckpointError, read_checkpoint
from tests.unit.jetspark.inspect.test_inspect import kafka_offset, rabbit_offset, write_checkpoint


def _cli_error(path: Path, capsys) -> str:
    """Run ``jetspark inspect path`` (text and JSON); both exit 1 with one ``jetspark:`` line."""
    for extra in ([], ["--json"]):
        assert main(["inspect", str(path), *extra]) == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err.startswith("jetspark: ") and captured.err.count("\n") == 1
    return captured.err


def _offsets_file(root: Path, batch: int, lines: list[str]) -> Path:
    entry = root / "offsets" / str(batch)
    entry.write_text("\n".join(lines))
    return entry


def test_bad_metadata_file_is_named(tmp_path, capsys):
    root = write_checkpoint(tmp_path / "cp", {0: [kafka_offset(0)]}, commits=[0])
    for content in ("not json\n", '["a list"]\n', '{"id": 12}\n', "{}\n"):
        (root / "metadata").write_text(content)
        with pytest.raises(CheckpointError, match="not a Spark checkpoint metadata file"):
            read_checkpoint(str(root))
        assert f"{root / 'metadata'}: not a Spark checkpoint metadata file" in _cli_error(root, capsys)
    (root / "metadata").write_bytes(b"\xff\xfe\x00binary")
    assert f"{root / 'metadata'}: not a text file" in _cli_error(root, capsys)


def test_non_numeric_partition_in_an_offset_is_named(tmp_path, capsys):
    bad = kafka_offset(1)
    bad["offsets"]["orders"]["zero"] = bad["offsets"]["orders"].pop("0")
    root = write_checkpoint(tmp_path / "cp", {0: [kafka_offset(0)], 1: [bad]}, commits=[0, 1])
    err = _cli_error(root, capsys)
    assert f"{root / 'offsets' / '1'}: a source offset or the batch metadata has an unexpected value" in err
    assert "'zero'" in err


@pytest.mark.parametrize("change", [
    lambda o: o["partitions"]["orders"]["0"].update(wm="soon"),  # a watermark that is no number
    lambda o: o.update(offsets=["orders"]),  # offsets that are no object
])
def test_unexpected_values_in_a_jetkafka_offset_are_named(tmp_path, capsys, change):
    bad = kafka_offset(0)
    change(bad)
    root = write_checkpoint(tmp_path / "cp", {0: [bad]}, commits=[0])
    assert f"{root / 'offsets' / '0'}: a source offset" in _cli_error(root, capsys)


def test_unexpected_values_in_a_jetrabbitmq_offset_are_named(tmp_path, capsys):
    bad = rabbit_offset(0, 0)
    bad["counts"]["late"] = "many"
    root = write_checkpoint(tmp_path / "cp", {0: [bad]}, commits=[0])
    assert f"{root / 'offsets' / '0'}: a source offset" in _cli_error(root, capsys)


@pytest.mark.parametrize(("lines", "says"), [
    (["garbage", "more garbage"], "no version line"),
    ([], "no version line"),
    (["v1", "{broken"], "a line is not JSON"),
    (["v1", "[1, 2]", "-"], "the batch metadata (line 2) is not a JSON object"),
    (["v1", json.dumps({"batchWatermarkMs": "late"}), "-"], "unexpected value"),
])
def test_garbage_offset_file_is_named(tmp_path, capsys, lines, says):
    root = write_checkpoint(tmp_path / "cp", {0: [kafka_offset(0)], 1: [kafka_offset(1)]}, commits=[0])
    entry = _offsets_file(root, 1, lines)
    err = _cli_error(root, capsys)
    assert err.startswith(f"jetspark: {entry}: ") and says in err


def test_binary_offset_file_is_named(tmp_path, capsys):
    root = write_checkpoint(tmp_path / "cp", {0: [kafka_offset(0)]}, commits=[0])
    (root / "offsets" / "0").write_bytes(bytes(range(256)))
    assert f"{root / 'offsets' / '0'}: not a text file" in _cli_error(root, capsys)


def test_missing_or_foreign_folder(tmp_path, capsys):
    missing = tmp_path / "gone"
    assert f"{missing}: no such folder" in _cli_error(missing, capsys)
    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "a.jpg").write_bytes(b"\xff\xd8")
    assert f"{foreign}: no offsets/ folder: not a streaming checkpoint" in _cli_error(foreign, capsys)
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    assert f"{a_file}: a file, not a folder" in _cli_error(a_file, capsys)


def test_timestamps_beyond_the_calendar_are_shown_as_numbers(tmp_path, capsys):
    far = kafka_offset(0)
    far["partitions"]["orders"]["0"]["maxTs"] = 10 ** 18
    root = write_checkpoint(tmp_path / "cp", {0: [far]}, commits=[0])
    assert main(["inspect", str(root)]) == 0
    assert f"{10 ** 18} ms" in capsys.readouterr().out


def test_an_unwritable_plot_path_is_an_error_not_a_traceback(tmp_path, capsys):
    root = write_checkpoint(tmp_path / "cp", {0: [kafka_offset(0)]}, commits=[0])
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert main(["inspect", str(root), "--plot", str(blocker / "w.png")]) == 1
    assert f"jetspark: --plot {blocker / 'w.png'}: cannot write the picture" in capsys.readouterr().err
