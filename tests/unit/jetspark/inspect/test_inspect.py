"""``jetspark inspect`` on checkpoints written as fixtures: offset/commit logs, source offsets,
the report's text, JSON and plot, the CLI, and the listener's parsing of a progress."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jetspark.devtools.cli import main
from jetspark.devtools.demo.report import Batch, batch_of, progress_line
from jetspark.errors import JetsparkError
from jetspark.inspect import Report, inspect
from jetspark.inspect.checkpoint import (
    JETKAFKA,
    JETRABBITMQ,
    OTHER,
    CheckpointError,
    PartitionState,
    parse_offset_entry,
    parse_source_offset,
    read_checkpoint,
    slowest_of,
)
from jetspark.inspect.services import PartitionLag, PreparedTransaction, wal_state
from jetspark.listener import batch_progress, format_line, observed_metrics

QUERY_ID = "6f1c1f9e-1111-4222-8333-444455556666"
T = 1_767_225_600_000  # 2026-01-01 00:00:00 UTC
META = {"batchWatermarkMs": 0, "batchTimestampMs": T + 90_000, "conf": {"spark.sql.shuffle.partitions": "4"}}


def kafka_offset(batch: int, *, idle3: bool = False) -> dict:
    """jetkafka's end offset of a batch: 4 partitions of topic "orders", partition 1 45 s behind."""
    mark = {p: {"maxTs": T + batch * 10_000 + (0 if p != 1 else -45_000), "idle": p == 3 and idle3,
                "progressMs": T + 100_000 + batch} for p in range(4)}
    for m in mark.values():
        m["wm"] = m["maxTs"] - 5_000
    live = [m["wm"] for p, m in mark.items() if not m["idle"]]
    return {"offsets": {"orders": {str(p): 100 * (batch + 1) + p for p in range(4)}},
            **({"from": {"orders": {str(p): 0 for p in range(4)}}, "initial": True} if batch == 0 else {}),
            "watermark": min(live), "partitions": {"orders": {str(p): m for p, m in mark.items()}}}


def rabbit_offset(batch: int, late_total: int, *, before_shared_shape: bool = False) -> dict:
    mark = {"maxTs": T + batch * 1000 + 5000, "wm": T + batch * 1000, "idle": False, "progressMs": T}
    counts = {"late": late_total, "duplicates": 1, "missingIdDropped": 0, "missingIdHashed": 0}
    if before_shared_shape:
        return {"seq": 10 * (batch + 1), "epoch": 2, "counts": counts,
                "watermark": {"watermark": T + batch * 1000, "partitions": {"queue": mark}}}
    return {"seq": 10 * (batch + 1), "epoch": 2, "watermark": T + batch * 1000,
            "partitions": {"orders": {"0": mark}}, "counts": counts}


def write_checkpoint(root: Path, offsets: dict[int, list[object]], commits: list[int],
                     spark_wm: dict[int, int] | None = None, query_id: str | None = QUERY_ID) -> Path:
    """A checkpoint folder as Spark writes it (with the .crc and a temporary file to skip)."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    if query_id:
        (root / "metadata").write_text(json.dumps({"id": query_id}) + "\n")
    for batch, sources in offsets.items():
        meta = {**META, "batchWatermarkMs": (spark_wm or {}).get(batch, 0)}
        lines = ["v1", json.dumps(meta)] + ["-" if s is None else json.dumps(s) for s in sources]
        (root / "offsets" / str(batch)).write_text("\n".join(lines))
        (root / "offsets" / f".{batch}.crc").write_bytes(b"crc")
    for batch in commits:
        (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    (root / "offsets" / ".7.1b2c.tmp").write_text("partial")
    return root


# -- source offsets ------------------------------------------------------------------------------
def test_jetkafka_offset_parses_per_partition_state_and_next_offsets():
    s = parse_source_offset(0, json.dumps(kafka_offset(2, idle3=True)))
    assert s.kind == JETKAFKA
    assert s.watermark == T + 20_000 - 45_000 - 5_000
    assert [p.label for p in s.partitions] == ["0", "1", "2", "3"]
    p1 = s.partitions[1]
    assert (p1.topic, p1.partition, p1.next_offset) == ("orders", 1, 301)
    assert (p1.max_ts, p1.wm, p1.idle, p1.progress_ms) == (T - 25_000, T - 30_000, False, T + 100_002)
    assert s.partitions[3].idle


def test_jetkafka_offset_of_several_topics_labels_partitions_with_their_topic():
    data = {"offsets": {"a": {"0": 5}, "b": {"0": 7, "1": 9}}, "watermark": None,
            "partitions": {"a": {"0": {"maxTs": None, "wm": None, "idle": False, "progressMs": T}}}}
    s = parse_source_offset(1, data)
    assert [(p.label, p.next_offset, p.max_ts) for p in s.partitions] == [
        ("a:0", 5, None), ("b:0", 7, None), ("b:1", 9, None)]
    assert s.index == 1 and s.watermark is None


def test_jetrabbitmq_offset_parses_seq_epoch_counts_and_the_queue_partition():
    s = parse_source_offset(0, rabbit_offset(3, late_total=4))
    assert s.kind == JETRABBITMQ
    assert (s.seq, s.epoch, s.watermark, s.counts["late"]) == (40, 2, T + 3000, 4)
    assert [(p.label, p.wm, p.max_ts) for p in s.partitions] == [("orders", T + 3000, T + 8000)]
    old = parse_source_offset(0, rabbit_offset(3, late_total=4, before_shared_shape=True))
    assert (old.kind, old.seq, old.watermark) == (JETRABBITMQ, 40, T + 3000)
    assert [(p.label, p.wm, p.max_ts) for p in old.partitions] == [("queue", T + 3000, T + 8000)]


@pytest.mark.parametrize("raw", [{"orders": {"0": 12}}, "not json", None, [1, 2]])
def test_other_sources_are_kept_raw(raw):
    s = parse_source_offset(0, raw)
    assert s.kind == OTHER and s.partitions == () and s.watermark is None


def test_offset_entry_needs_a_version_line_and_json():
    meta, sources = parse_offset_entry('v1\n{"batchWatermarkMs":5}\n-\n{"a":1}')
    assert meta["batchWatermarkMs"] == 5 and sources == [None, {"a": 1}]
    with pytest.raises(CheckpointError, match="version line"):
        parse_offset_entry('{"batchWatermarkMs":5}')
    with pytest.raises(CheckpointError, match="not JSON"):
        parse_offset_entry("v1\n{}\n{broken")


def test_slowest_is_the_least_non_idle_watermark_behind_the_leading_one():
    def mark(wm, idle=False):
        return PartitionState("x", None, None, None if wm is None else wm + 1, wm, idle, None)

    assert slowest_of({"0": mark(100), "1": mark(40), "2": mark(90), "3": mark(10, idle=True)}) == ("1", 60)
    assert slowest_of({"0": mark(None), "1": mark(50)}) == ("1", 0)
    assert slowest_of({"0": mark(10, idle=True)}) is None
    assert slowest_of({"b": mark(7), "a": mark(7)}) == ("a", 0)  # ties: by label


# -- the logs ------------------------------------------------------------------------------------
def test_a_batch_planned_but_not_committed_is_the_replay_batch(tmp_path):
    cp = read_checkpoint(str(write_checkpoint(
        tmp_path / "cp", {b: [kafka_offset(b, idle3=b >= 2)] for b in range(4)}, commits=[0, 1, 2],
        spark_wm={1: T - 1000, 2: T + 2000, 3: T + 3000})))
    assert cp.query_id == QUERY_ID
    assert [b.batch_id for b in cp.batches] == [0, 1, 2, 3]
    assert [b.committed for b in cp.batches] == [True, True, True, False]
    assert (cp.last_committed, cp.replay_batch, cp.first_logged) == (2, 3, 0)
    assert cp.batches[0].spark_watermark_ms is None  # Spark's 0: no watermark yet
    assert cp.batches[3].spark_watermark_ms == T + 3000
    assert cp.batches[3].timestamp_ms == T + 90_000
    b2 = cp.batches[2]
    assert b2.watermark == kafka_offset(2, idle3=True)["watermark"]
    assert b2.partitions["3"].idle and not b2.partitions["0"].idle
    assert b2.late is None  # jetkafka's offsets do not record late counts


def test_every_batch_committed_means_nothing_to_replay(tmp_path):
    cp = read_checkpoint(str(write_checkpoint(tmp_path / "cp", {0: [kafka_offset(0)]}, commits=[0])))
    assert cp.replay_batch is None and cp.last_committed == 0


def test_last_n_batches_and_a_purged_log(tmp_path):
    root = write_checkpoint(tmp_path / "cp", {b: [kafka_offset(b)] for b in range(5, 12)},
                            commits=list(range(5, 11)))
    cp = read_checkpoint(str(root), last=3)
    assert [b.batch_id for b in cp.batches] == [9, 10, 11] and cp.first_logged == 5
    assert cp.replay_batch == 11
    assert len(read_checkpoint(str(root), last=0).batches) == 7
    assert len(read_checkpoint(f"file://{root}").batches) == 7


def test_jetrabbitmq_late_per_batch_from_running_counts(tmp_path):
    totals = [1, 1, 4, 6]  # late so far after batches 0..3
    root = write_checkpoint(tmp_path / "cp", {b: [rabbit_offset(b, totals[b])] for b in range(4)},
                            commits=[0, 1, 2, 3])
    assert [b.late for b in read_checkpoint(str(root)).batches] == [1, 0, 3, 2]
    # with only the newest two shown, the batch before them still gives the difference
    assert [b.late for b in read_checkpoint(str(root), last=2).batches] == [3, 2]
    # a purged log: the oldest batch left has no predecessor to subtract
    purged = write_checkpoint(tmp_path / "purged", {b: [rabbit_offset(b, totals[b])] for b in (2, 3)},
                              commits=[2, 3])
    assert [b.late for b in read_checkpoint(str(purged)).batches] == [None, 2]


def test_a_source_without_offset_and_a_second_source(tmp_path):
    offsets = {0: [None, rabbit_offset(0, 0)], 1: [kafka_offset(1), rabbit_offset(1, 0)]}
    root = write_checkpoint(tmp_path / "cp", offsets, commits=[0, 1], query_id=None)
    cp = read_checkpoint(str(root))
    assert cp.query_id is None
    assert [s.kind for s in cp.batches[0].sources] == [OTHER, JETRABBITMQ]
    b1 = cp.batches[1]
    assert set(b1.partitions) == {"0/0", "0/1", "0/2", "0/3", "1/orders"}
    assert b1.watermark == min(kafka_offset(1)["watermark"], T + 1000)


def test_not_a_checkpoint(tmp_path):
    with pytest.raises(CheckpointError, match="not a streaming checkpoint"):
        read_checkpoint(str(tmp_path))


# -- report: text, JSON, plot --------------------------------------------------------------------
def _report(tmp_path) -> Report:
    root = write_checkpoint(tmp_path / "cp", {b: [kafka_offset(b, idle3=b >= 2)] for b in range(4)},
                            commits=[0, 1, 2])
    cp = read_checkpoint(str(root))
    lags = [PartitionLag("orders", p, 400 + p, 0, 450 + p * 10) for p in range(4)]
    prepared = [PreparedTransaction(f"jetspark:{QUERY_ID}:3:{p}:0", QUERY_ID, 3, p, 0, T, 12_300, "jetspark",
                                    "jetspark") for p in range(2)]
    return Report(cp, T + 200_000, kafka=lags, sink_id=QUERY_ID, prepared=prepared)


def test_report_text_names_the_replay_batch_lags_and_prepared_transactions(tmp_path):
    text = _report(tmp_path).text()
    assert "replay     batch 3 is planned, not committed: a restart runs it again" in text
    lines = text.splitlines()
    top = lines.index(next(line for line in lines if line.startswith("batch  state")))
    rows = {line.split()[0]: line.split() for line in lines[top + 1:top + 5]}
    assert rows["3"][1] == "PLANNED" and rows["2"][1] == "committed"
    assert "1 (45.0 s)" in lines[top + 1]  # batch 0: partition 1 holds W, 45 s behind
    assert lines[top + 3].endswith(" 3")  # batch 2: partition 3 idle
    part_lines = text[text.index("partitions after batch 3:"):].splitlines()[2:6]
    # partition, …, next offset, end offset, lag = end - next
    assert [line.split()[-3:] for line in part_lines] == [["400", "450", "50"], ["401", "460", "59"],
                                                          ["402", "470", "68"], ["403", "480", "77"]]
    assert f"prepared transactions (sink {QUERY_ID}): 2" in text
    assert f"jetspark:{QUERY_ID}:3:1:0" in text and "12.3 s" in text


def test_report_json_is_plain_and_complete(tmp_path):
    data = json.loads(json.dumps(_report(tmp_path).to_json()))
    assert (data["queryId"], data["replayBatch"], data["lastCommittedBatch"]) == (QUERY_ID, 3, 2)
    b0 = data["batches"][0]
    assert b0["slowest"] == {"partition": "1", "behindMs": 45_000}
    assert b0["sources"][0]["partitions"][1]["next_offset"] == 101
    assert [k["lag"] for k in data["kafka"]] == [50, 59, 68, 77]
    assert [t["age_ms"] for t in data["prepared"]] == [12_300, 12_300]


def test_inspect_function_without_services(tmp_path):
    root = write_checkpoint(tmp_path / "cp", {0: [kafka_offset(0)]}, commits=[])
    report = inspect(str(root))
    assert report.kafka is None and report.prepared is None and report.errors == []
    assert report.checkpoint.replay_batch == 0


# -- jetrabbitmq's walLocation ---------------------------------------------------------------------
def test_wal_state_counts_wal_messages_dedup_and_lease_files(tmp_path):
    import numpy as np
    import pyarrow as pa

    from jetspark.datasources.rabbitmq.dedup import DedupStore
    from jetspark.datasources.rabbitmq.lease import Lease
    from jetspark.datasources.rabbitmq.wal import WAL_SCHEMA, WalRange, WriteAheadLog

    def rows(n: int) -> pa.Table:
        return pa.table({"message_id": [f"m{i}" for i in range(n)], "body": [b"x"] * n,
                         "routing_key": ["r"] * n, "exchange": [""] * n,
                         "headers": pa.array([[]] * n, WAL_SCHEMA.field("headers").type),
                         "timestamp": pa.array([0] * n, pa.int64()).cast(pa.timestamp("us", "UTC")),
                         "redelivered": [False] * n, "event_time_ms": np.zeros(n, np.int64),
                         "late": [False] * n}, schema=WAL_SCHEMA)

    loc = str(tmp_path / "wal-loc")
    lease = Lease(loc, 60_000)
    lease.acquire()
    wal = WriteAheadLog(loc)
    wal.write(WalRange(0, 3, 1), rows(3))
    wal.write(WalRange(3, 8, 1), rows(5))
    DedupStore(loc, 3_600_000).add(["a", "b"], end_seq=3)
    held = wal_state(loc)
    lease.release()
    assert held.wal.files == 2 and held.wal.bytes > 0
    assert held.wal_messages == 8 and held.wal_ranges == ((0, 3, 1), (3, 8, 1))
    assert held.dedup.files >= 1 and held.dedup.bytes > 0
    assert held.lease.files == 1 and held.holder["epoch"] == 1 and not held.holder["released"]
    assert wal_state(loc).holder["released"]
    (tmp_path / "fresh").mkdir()
    empty = wal_state(str(tmp_path / "fresh"))
    assert (empty.wal.files, empty.wal_messages, empty.holder) == (0, 0, None)
    for uri in (f"file://{loc}", f"FILE://localhost{loc}"):
        assert wal_state(uri).wal_ranges == held.wal_ranges


@pytest.mark.parametrize("where, says", [("none", "no such folder"),
                                         ("nosuchfs://bucket/wal", "a URI of a filesystem pyarrow opens")])
def test_wal_state_of_a_folder_it_cannot_read_is_an_error(tmp_path, where, says):
    location = where if "://" in where else str(tmp_path / where)
    with pytest.raises(JetsparkError, match=says):
        wal_state(location)


# -- the CLI -------------------------------------------------------------------------------------
def test_cli_json_plot_and_bounded_follow(tmp_path, capsys):
    from tests.pictures import check_watermark_picture
    from tests.unit.jetspark.inspect.test_plot import spread

    root = write_checkpoint(tmp_path / "cp", {b: [spread(kafka_offset(b))] for b in range(3)}, commits=[0, 1])
    png = tmp_path / "out" / "w.png"
    assert main(["inspect", str(root), "--json", "--plot", str(png)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["replayBatch"] == 2
    check_watermark_picture(png, partitions=4)
    assert main(["inspect", str(root), "--batches", "1", "--follow", "0", "--rounds", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count(f"query id   {QUERY_ID}") == 2 and "batches    2..2 shown" in out
    assert main(["inspect", str(tmp_path / "nothing")]) == 1
    assert "nothing: no such folder" in capsys.readouterr().err


# -- the listener's parsing ------------------------------------------------------------------------
def _progress(batch: int, *, as_text: bool, rabbit: bool = False) -> dict:
    end = rabbit_offset(batch, 5) if rabbit else kafka_offset(batch, idle3=True)
    start = rabbit_offset(batch - 1, 2) if rabbit else kafka_offset(batch - 1)
    return {"id": QUERY_ID, "runId": "run-1", "name": None, "batchId": batch, "numInputRows": 77,
            "eventTime": {"watermark": "2026-01-01T00:00:05.000Z"},
            "sources": [{"description": "x", "startOffset": json.dumps(start) if as_text else start,
                         "endOffset": json.dumps(end) if as_text else end}],
            "observedMetrics": {} if rabbit else {"jetkafka": {"records": 70, "lateRecords": 3,
                                                               "watermark": "2026-01-01 00:00:05"}}}


@pytest.mark.parametrize("as_text", [True, False])
def test_listener_reads_w_slowest_idle_and_late_from_a_kafka_progress(as_text):
    b = batch_progress(_progress(4, as_text=as_text))
    assert (b.batch_id, b.rows, b.late) == (4, 70, 3)
    assert b.watermark == kafka_offset(4, idle3=True)["watermark"]
    assert b.spark_watermark_ms == T + 5000
    assert b.slowest == ("1", 45_000) and b.idle == ["3"]
    assert format_line(b) == ("batch 4: 70 rows, 3 late | W 2025-12-31 23:59:50.000 "
                              "| slowest 1 (45.0 s behind) | idle: 3")


def test_listener_late_of_a_rabbitmq_batch_is_the_running_count_difference():
    b = batch_progress(json.dumps(_progress(2, as_text=True, rabbit=True)))
    assert (b.rows, b.late, b.idle, b.slowest) == (77, 3, [], ("orders", 0))
    # read through read_rabbitmq_stream: its observed count is the batch's, not added to the offsets'
    helper = _progress(2, as_text=True, rabbit=True)
    helper["observedMetrics"] = {"jetrabbitmq": {"records": 9, "lateRecords": 3, "watermark": None}}
    assert batch_progress(helper).late == 3


def test_listener_line_of_a_query_without_jetspark_sources():
    p = {"id": "q", "runId": "r", "batchId": 0, "numInputRows": 5, "sources": [
        {"startOffset": None, "endOffset": {"t": {"0": 5}}}]}
    assert format_line(batch_progress(p)) == "batch 0: 5 rows, - late"


def test_demo_progress_line_keeps_its_layout_with_the_slowest_partition():
    b = Batch(3, 250, 1, T + 95_000, T, {"0": {"wm": T + 140_000}, "1": {"wm": T + 95_000},
                                         "3": {"wm": T + 90_000, "idle": True}})
    line = progress_line(b, T, ("1", 45_000))
    assert line == ("  batch  3:    250 rows, 1 late | W +95.0s | slowest p1 45.0 s behind | "
                    "p0 +140.0s  p1 +95.0s  p3 +90.0s idle")
    assert progress_line(b, T) == ("  batch  3:    250 rows, 1 late | W +95.0s | "
                                   "p0 +140.0s  p1 +95.0s  p3 +90.0s idle")


# Over Spark Connect the server's progress JSON gives each observed metric set as values and a
# schema (captured from PySpark 4.3's Connect server), and the client's progress objects keep it.
CONNECT_JETKAFKA = {"values": [70, 3, T + 5000], "schema": {"type": "struct", "fields": [
    {"name": "records", "type": "long", "nullable": False, "metadata": {}},
    {"name": "lateRecords", "type": "long", "nullable": False, "metadata": {}},
    {"name": "watermark", "type": "timestamp", "nullable": True, "metadata": {}}]}}


def test_observed_metrics_read_alike_over_spark_connect_and_classic():
    from pyspark.sql.streaming.listener import StreamingQueryProgress

    classic = _progress(4, as_text=True)
    connect = {**classic, "observedMetrics": {"jetkafka": CONNECT_JETKAFKA}}
    expected = {"records": 70, "lateRecords": 3}
    assert {k: observed_metrics(classic)["jetkafka"][k] for k in expected} == expected
    for form in (connect, json.dumps(connect)):
        assert observed_metrics(form) == {"jetkafka": {**expected, "watermark": "2026-01-01 00:00:05.000"}}
    # what query.lastProgress and a listener event hold over Connect: Row(values, schema)
    as_connect_client_has_it = StreamingQueryProgress.fromJson(
        {**connect, "id": "3f1e3c9e-1b7a-4c42-9a55-0d3c2b9d6a11",
         "runId": "9d5f0b6e-8a77-4f3e-b1c2-7e4a5d6c8b90", "timestamp": "x", "batchDuration": 1,
         "durationMs": {}, "stateOperators": [],
         "sources": [], "sink": {"description": "s", "numOutputRows": 0, "metrics": {}},
         "inputRowsPerSecond": 0.0, "processedRowsPerSecond": 0.0})
    with pytest.raises(Exception):  # noqa: B017 - PySpark's own reading, which the helper replaces
        as_connect_client_has_it["observedMetrics"]["jetkafka"]["records"]
    assert observed_metrics(as_connect_client_has_it)["jetkafka"]["records"] == 70
    b = batch_progress(connect)
    assert (b.rows, b.late) == (70, 3)


def test_demo_batch_reads_observed_metrics_in_either_form():
    classic = _progress(4, as_text=True)
    connect = {**classic, "observedMetrics": {"jetkafka": CONNECT_JETKAFKA}}
    for form in (classic, connect):
        b = batch_of(form, "t")
        assert (b.batch_id, b.rows, b.late) == (4, 70, 3)
