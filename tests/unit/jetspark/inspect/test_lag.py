"""Which offsets ``jetspark inspect`` measures Kafka lag from: the last committed batch's end
offsets, or the starting offsets before any commit (a planned batch is not yet consumed)."""

from __future__ import annotations

import json

from jetspark.inspect import Report
from jetspark.inspect.checkpoint import committed_kafka_offsets, read_checkpoint
from jetspark.inspect.services import PartitionLag
from tests.unit.jetspark.inspect.test_inspect import T, kafka_offset, write_checkpoint


def test_lag_is_measured_from_the_last_committed_batch_not_the_planned_one(tmp_path):
    root = write_checkpoint(tmp_path / "cp", {b: [kafka_offset(b)] for b in range(4)}, commits=[0, 1, 2])
    batch, tps = committed_kafka_offsets(read_checkpoint(str(root)))
    assert batch == 2  # batch 3 is planned only: a restart reads its records again
    assert tps == [("orders", p, 300 + p) for p in range(4)]


def test_before_any_commit_lag_counts_from_the_starting_offsets(tmp_path):
    root = write_checkpoint(tmp_path / "cp", {0: [kafka_offset(0)]}, commits=[])
    assert committed_kafka_offsets(read_checkpoint(str(root))) == (None, [("orders", p, 0) for p in range(4)])


def test_text_and_json_show_committed_end_and_lag(tmp_path):
    root = write_checkpoint(tmp_path / "cp", {b: [kafka_offset(b)] for b in range(4)}, commits=[0, 1, 2])
    lags = [PartitionLag("orders", p, 300 + p, 0, 350 + p * 10) for p in range(4)]
    report = Report(read_checkpoint(str(root)), T, kafka=lags, lag_batch=2)
    text = report.text()
    rows = text[text.index("partitions after batch 3:"):].splitlines()[1:6]
    assert rows[0].endswith("next offset  committed  end offset  lag")
    # next offset (after the planned batch 3), committed (after batch 2), end, lag = end - committed
    assert [r.split()[-4:] for r in rows[1:]] == [["400", "300", "350", "50"], ["401", "301", "360", "59"],
                                                  ["402", "302", "370", "68"], ["403", "303", "380", "77"]]
    assert "lag: the broker's end offset minus the committed offset, the next offset after batch 2" in text
    data = json.loads(json.dumps(report.to_json()))
    assert data["kafkaLagBatch"] == 2
    assert [(k["partition"], k["offset"], k["end"], k["lag"]) for k in data["kafka"]] == [
        (0, 300, 350, 50), (1, 301, 360, 59), (2, 302, 370, 68), (3, 303, 380, 77)]


def test_late_column_only_where_the_checkpoint_records_late_counts(tmp_path):
    from jetspark.inspect.report import LATE_NOTE
    from tests.unit.jetspark.inspect.test_inspect import rabbit_offset

    kafka = write_checkpoint(tmp_path / "kafka", {b: [kafka_offset(b)] for b in range(2)}, commits=[0, 1])
    text = Report(read_checkpoint(str(kafka)), T).text()
    header = next(line for line in text.splitlines() if line.startswith("batch  state"))
    assert header.split() == ["batch", "state", "W", "Spark", "watermark", "slowest", "(behind)", "idle"]
    assert LATE_NOTE in text and "lateRecords" in LATE_NOTE
    assert [b["late"] for b in Report(read_checkpoint(str(kafka)), T).to_json()["batches"]] == [None, None]

    rabbit = write_checkpoint(tmp_path / "rabbit", {b: [rabbit_offset(b, [2, 5][b])] for b in range(2)},
                              commits=[0, 1])
    text = Report(read_checkpoint(str(rabbit)), T).text()
    lines = text.splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("batch  state"))
    assert lines[top].split()[5] == "late"  # after batch, state, W, "Spark watermark"
    # batch, state, W (a date and a time), Spark watermark (-), late: the running count's steps
    assert [lines[top + i].split()[:2] + lines[top + i].split()[4:6] for i in (1, 2)] == [
        ["0", "committed", "-", "2"], ["1", "committed", "-", "3"]]
    assert LATE_NOTE not in text
