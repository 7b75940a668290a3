"""Early results on a real local Spark: provisional rows while windows fill, one final row
per window equal to the reference, the same rows when a batch is replayed, Spark's update
output mode into jetjdbc upserts, and jetjdbc upserts under driver kills."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from pyspark.errors import StreamingQueryException

from jetspark.windowing import ops, session, sliding, tumbling, window_aggregate
from jetspark.windowing.api import chosen_state_api
from jetspark.windowing.reference import reference_windows
from tests.faults_harness import run_script
from tests.integration.test_windowing_spark import (
    BASE_US,
    SEC,
    _us,
    events_of,
    heartbeat,
    make_batches,
    write_batch,
)

pytestmark = pytest.mark.integration
TWS, AIPWS = "transformWithStateInPandas", "applyInPandasWithState"  # the default with early results first

AGGS = {"n": ops.count(), "s": ops.sum_("x")}
SCRIPT = Path(__file__).parent / "scripts" / "early_results_jdbc_query.py"


@pytest.fixture
def files(tmp_path):
    """Three micro-batches of events (one file each), then a heartbeat that closes every window."""
    folder = tmp_path / "in"
    folder.mkdir()
    batches = make_batches(seed=5, batches=3, rows=60, keys=3)
    for i, b in enumerate(batches):
        write_batch(folder, i, b)
    write_batch(folder, len(batches), heartbeat(int(max(b["ts"].max() for b in batches)) + 120 * SEC))
    return folder, batches


def _run(spark, folder: Path, build, ckpt: Path, mode: str = "append") -> dict[int, list[dict]]:
    """Run the query to the end (``mode``: Spark's output mode); its output rows by micro-batch id."""
    out: dict[int, list[dict]] = {}

    def collect(df, batch_id: int) -> None:
        out[batch_id] = [r.asDict() for r in df.collect()]

    schema = spark.read.parquet(str(folder)).schema
    src = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(folder))
           .withWatermark("watermark", "0 seconds"))
    q = (build(src).writeStream.outputMode(mode).foreachBatch(collect)
         .option("checkpointLocation", str(ckpt)).start())
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    return out


def _window(r: dict) -> tuple:
    return r["k"], _us(r["window_start"]), _us(r["window_end"])


@pytest.mark.parametrize(("api", "mode"), [(TWS, "update"), (AIPWS, "append")])
def test_provisional_rows_come_before_one_final_row_equal_to_the_reference(spark, files, tmp_path, api, mode):
    """Both state APIs (Spark allows its update output mode with transformWithStateInPandas
    only): the same rows."""
    folder, batches = files
    window = sliding("30 seconds", "10 seconds")

    def build(src):
        return window_aggregate(src, key="k", time="ts", window=window, aggs=AGGS, state_api=api, buckets=2,
                                early_results="0 seconds")

    by_batch = _run(spark, folder, build, tmp_path / "ck", mode)
    finals: dict[tuple, tuple[int, dict]] = {}
    for b, rows in by_batch.items():
        for r in rows:
            if r["final"]:
                assert _window(r) not in finals, f"two final rows of {_window(r)}"
                finals[_window(r)] = (b, r)
    expected = reference_windows(events_of(batches), window, AGGS)
    assert set(finals) == set(expected)
    for w, (_, r) in finals.items():
        assert r["n"] == expected[w]["n"] and r["s"] == pytest.approx(expected[w]["s"])
    provisional = [(b, r) for b, rows in by_batch.items() for r in rows if not r["final"]]
    assert provisional, "no provisional row"
    for b, r in provisional:
        final_batch, final = finals[_window(r)]
        assert b < final_batch, f"a provisional row of {_window(r)} in batch {b}, its final in {final_batch}"
        assert r["n"] <= final["n"]
        # batch b read file b: a provisional window holds one of that file's events (a quiet key
        # or window is not emitted again)
        k, start, end = _window(r)
        new = zip(batches[b]["k"], batches[b]["ts"], strict=True)
        assert any(kk == k and start <= t < end for kk, t in new)
    if api != chosen_state_api(None, early_results=True):
        return
    # a restart replays the last batch (its commit removed) with the very same rows
    last = max(by_batch)
    assert any(r["final"] for r in by_batch[last])
    for name in (str(last), f".{last}.crc"):
        (tmp_path / "ck" / "commits" / name).unlink(missing_ok=True)
    replayed = _run(spark, folder, build, tmp_path / "ck")
    assert sorted(replayed) == [last]
    assert sorted((_window(r), r["n"], r["final"]) for r in replayed[last]) == sorted(
        (_window(r), r["n"], r["final"]) for r in by_batch[last])


def test_a_replayed_batch_emits_the_same_provisional_rows(spark, tmp_path):
    """A micro-batch run again after a crash (its commit removed) emits the same provisional
    rows: they follow from the restored state (and the batch's time in Spark's offset log)."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i, secs in enumerate(([1, 2, 3, 11], [4, 12, 13])):  # W stays at 0 s: no closing batch
        n = 2 * len(secs)
        ts = [BASE_US + t * SEC for t in secs for _ in "ab"]
        write_batch(folder, i, {"k": ["a", "b"] * len(secs), "ts": ts, "x": [1.0] * n, "y": [0.0] * n,
                                "watermark": [BASE_US] * n, "heartbeat": [False] * n})

    def build(src):
        return window_aggregate(src, key="k", time="ts", window=tumbling("10 seconds"), aggs=AGGS, buckets=2,
                                early_results="0 seconds")

    by_batch = _run(spark, folder, build, tmp_path / "ck")
    assert sorted(by_batch) == [0, 1]
    rows = sorted((_window(r), r["n"], r["final"]) for r in by_batch[1])
    first, second = (BASE_US, BASE_US + 10 * SEC), (BASE_US + 10 * SEC, BASE_US + 20 * SEC)
    assert rows == [(("a", *first), 4, False), (("a", *second), 3, False),
                    (("b", *first), 4, False), (("b", *second), 3, False)]
    for name in ("1", ".1.crc"):
        (tmp_path / "ck" / "commits" / name).unlink(missing_ok=True)
    replayed = _run(spark, folder, build, tmp_path / "ck")
    assert sorted(replayed) == [1]
    assert sorted((_window(r), r["n"], r["final"]) for r in replayed[1]) == rows


def _shift_batch_time(ckpt: Path, batch: int, by_ms: int) -> int:
    """Move the processing time Spark recorded for ``batch`` in its offset log; the new time."""
    log = ckpt / "offsets" / str(batch)
    lines = log.read_text().splitlines()
    metadata = json.loads(lines[1])
    metadata["batchTimestampMs"] += by_ms
    log.write_text("\n".join([lines[0], json.dumps(metadata), *lines[2:]]) + "\n")
    (ckpt / "offsets" / f".{batch}.crc").unlink(missing_ok=True)
    return metadata["batchTimestampMs"]


def _rewind(ckpt: Path, batch: int) -> None:
    """Make ``batch`` the next to run again: its commit and every later batch forgotten (a batch
    without rows that Spark ran as W moved is planned again)."""
    for log in ("commits", "offsets"):
        for f in (ckpt / log).iterdir():
            b = int(f.name.strip(".").removesuffix(".crc")) if f.name.strip(".")[:1].isdigit() else None
            if b is not None and (b > batch or (b == batch and log == "commits")):
                f.unlink()


@pytest.mark.parametrize("api", [TWS, pytest.param(AIPWS, marks=pytest.mark.soak)])
def test_a_period_is_replayed_by_the_batch_time_spark_recorded(spark, tmp_path, api):
    """early_results="1 hour": batch 0 emits provisional rows, batches 1 and 2 (seconds later)
    none, their changes kept. Batch 2, its recorded time moved 2 hours on, is replayed: its
    period has elapsed by that time (not by the clock), so every window changed since batch 0
    is shown; replayed once more, the very same rows."""
    folder = tmp_path / "in"
    folder.mkdir()
    # W at i s in batch i: no window closes, and no batch's rows are late (at or before W)
    for i, secs in enumerate(([1, 2, 3, 11], [4, 12], [22])):
        n = 2 * len(secs)
        ts = [BASE_US + t * SEC for t in secs for _ in "ab"]
        write_batch(folder, i, {"k": ["a", "b"] * len(secs), "ts": ts, "x": [1.0] * n, "y": [0.0] * n,
                                "watermark": [BASE_US + i * SEC] * n, "heartbeat": [False] * n})

    def build(src):
        return window_aggregate(src, key="k", time="ts", window=tumbling("10 seconds"), aggs=AGGS, buckets=1,
                                state_api=api, early_results="1 hour")

    def shown(rows: list[dict]) -> list[tuple]:
        return sorted(((r["k"], (_us(r["window_start"]) - BASE_US) // SEC), r["n"], r["final"]) for r in rows)

    ckpt = tmp_path / "ck"
    by_batch = _run(spark, folder, build, ckpt)
    assert shown(by_batch[0]) == [(("a", 0), 3, False), (("a", 10), 1, False), (("b", 0), 3, False),
                                  (("b", 10), 1, False)]
    assert all(not rows for b, rows in by_batch.items() if b > 0), by_batch  # 2: the last with rows
    _rewind(ckpt, 2)
    _shift_batch_time(ckpt, 2, 2 * 3600 * 1000)
    replayed = _run(spark, folder, build, ckpt)
    changed = [(("a", 0), 4, False), (("a", 10), 2, False), (("a", 20), 1, False),
               (("b", 0), 4, False), (("b", 10), 2, False), (("b", 20), 1, False)]
    assert shown(replayed[2]) == changed
    _rewind(ckpt, 2)
    again = _run(spark, folder, build, ckpt)
    assert shown(again[2]) == changed


def test_without_early_results_the_schema_has_no_final_column_and_a_static_frame_is_all_final(spark):
    df = spark.createDataFrame([("a", dt.datetime(2026, 1, 1, 0, 0, 1))], "k string, ts timestamp")
    plain = window_aggregate(df, key="k", time="ts", window=tumbling("10 seconds"), aggs={"n": ops.count()})
    assert "final" not in plain.columns
    early = window_aggregate(df, key="k", time="ts", window=tumbling("10 seconds"), aggs={"n": ops.count()},
                             early_results="1 second")
    assert [(r.n, r.final) for r in early.collect()] == [(1, True)]


def _table_rows(dsn: str, schema: str, table: str) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql.SQL(
            "SELECT k, (extract(epoch FROM window_start) * 1000000)::bigint, "
            "(extract(epoch FROM window_end) * 1000000)::bigint, n, s, final FROM {} ORDER BY 1, 2").format(
            sql.Identifier(schema, table))).fetchall()


def test_sessions_upserted_by_start_end_as_their_final_rows(spark, files, tmp_path, pg_dsn, pg_schema):
    """Sessions upserted by (k, window_start) end as their final rows; a provisional session
    that a later event merged into one with an earlier start stays behind, covered by that
    final row (docs/tutorials/early-results.md). Spark refuses its update output mode for jetjdbc, as
    for every sink of the Python Data Source API."""
    folder, batches = files
    window = session("3 seconds")
    schema = spark.read.parquet(str(folder)).schema

    def start(mode: str, table: str):
        src = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(folder))
               .withWatermark("watermark", "0 seconds"))
        windows = window_aggregate(src, key="k", time="ts", window=window, aggs=AGGS, buckets=2,
                                   early_results="0 seconds")
        return (windows.writeStream.outputMode(mode).format("jetjdbc").option("url", pg_dsn)
                .option("table", f"{pg_schema}.{table}").option("commit", "upsert")
                .option("keys", "k,window_start").option("createTable", "true")
                .option("checkpointLocation", str(tmp_path / f"ck-{mode}")).start())

    q = start("update", "refused")
    with pytest.raises(StreamingQueryException, match="jetjdbc does not support Update mode"):
        q.processAllAvailable()
    q.stop()
    q = start("append", "sessions")
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    rows = _table_rows(pg_dsn, pg_schema, "sessions")
    expected = reference_windows(events_of(batches), window, AGGS)
    finals = {(k, s, e): n for k, s, e, n, _, final in rows if final}
    assert finals == {w: r["n"] for w, r in expected.items()}
    for k, s, e, n, _, final in rows:
        if not final:
            assert any(fk == k and fs <= s and e <= fe and n <= fn for (fk, fs, fe), fn in finals.items())


@pytest.mark.soak  # the suite's time budget (about 2 minutes): a slice a run
def test_upserts_with_exactly_once_survive_a_kill_between_provisional_and_final_rows(
        spark, files, tmp_path, pg_dsn, pg_schema):
    folder, batches = files
    table = f"{pg_schema}.windows"
    args = [pg_dsn, table, str(tmp_path / "ck"), str(folder)]
    # 1: killed once batch 0 is in the table (provisional rows of the windows it left open,
    # final ones of those its own W closed), before Spark recorded it
    run = run_script(SCRIPT, *args, fault="sink.after_commit@1", state_dir=tmp_path)
    assert run.killed, run.output[-3000:]
    first = _table_rows(pg_dsn, pg_schema, "windows")
    provisional = {(k, s, e) for k, s, e, _, _, final in first if not final}
    assert provisional
    # 2: the restart replays batch 0, writes batch 1 and is killed again
    run = run_script(SCRIPT, *args, fault="sink.after_commit@2", state_dir=tmp_path)
    assert run.killed, run.output[-3000:]
    assert any(r[5] for r in _table_rows(pg_dsn, pg_schema, "windows"))
    run_script(SCRIPT, *args, state_dir=tmp_path).check_ok()
    rows = _table_rows(pg_dsn, pg_schema, "windows")
    expected = reference_windows(events_of(batches), tumbling("10 seconds"), AGGS)
    assert all(r[5] for r in rows), "a provisional row is the last word of its window"
    assert {(k, s, e): n for k, s, e, n, _, _ in rows} == {w: r["n"] for w, r in expected.items()}
    assert len(rows) == len(expected)  # one row per window
    assert provisional <= {(k, s, e) for k, s, e, *_ in rows}  # each ended as its final row
    # finalColumn: a stray provisional row (and a second final one) of a final window changes nothing
    k, start, end, n, _, _ = rows[0]
    stale = spark.createDataFrame(
        [(k, dt.datetime.fromtimestamp(start / SEC, dt.UTC), dt.datetime.fromtimestamp(end / SEC, dt.UTC),
          n - 1, 0.0, final) for final in (False, True)],
        "k string, window_start timestamp, window_end timestamp, n bigint, s double, final boolean")
    for row in (stale.where("NOT final"), stale.where("final")):
        (row.write.format("jetjdbc").option("url", pg_dsn).option("table", table).option("commit", "upsert")
         .option("keys", "k,window_start").option("finalColumn", "final").mode("append").save())
    assert _table_rows(pg_dsn, pg_schema, "windows") == rows
