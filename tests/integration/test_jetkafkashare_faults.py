"""jetkafkashare -> jetjdbc (two-phase) exactly once through driver kills at each point of the
protocol (docs/design.md, "Share groups"), and with a plain share consumer of the same group
beside the restarted query.

Each test kills the query once (SIGKILL of the driver's whole session at a fault point) and
runs it again on the same checkpoint: every record is once in the table, no prepared
transaction of the sink is left, and every record was ACCEPTed (a new member of the group is
handed nothing but what is produced after). The records the dead member held come back when
their locks expire, so each test waits about the group's lock duration once (15 s at least:
the broker's ``group.share.min.record.lock.duration.ms``).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from jetspark.datasources.kafkashare.acquired import count
from tests.faults_harness import run_script, start_script
from tests.integration.scripts.kafkashare_common import (
    PlainShareConsumer,
    configure_group,
    leftovers,
    produce,
    share_group,
)
from tests.integration.scripts.sink_pg import id_counts, prepared_with_prefix, rollback_prepared_in_schema

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).parent / "scripts" / "kafkashare_query.py"
N, PARTITIONS, CHUNK = 40, 2, 10  # batches of 10 (maxOffsetsPerTrigger in the script)
VALUES = [f"v{i}".encode() for i in range(N)]
LOCK_LOST = "ACCEPT not confirmed"  # the driver's warning: a batch outlived its locks


def _logged(checkpoint: Path, log: str) -> set[int]:
    """The batch ids in Spark's ``offsets`` or ``commits`` log."""
    folder = checkpoint / log
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.exists() else set()


def _logged_offset(checkpoint: Path, batch: int) -> dict:
    """The source's offset of ``batch`` in Spark's offset log (its last line)."""
    return json.loads((checkpoint / "offsets" / str(batch)).read_text().splitlines()[-1])


def _absorbed(output: str) -> int:
    line = next(line for line in output.splitlines() if line.startswith("ABSORBED "))
    return int(line.split()[1])


@pytest.fixture
def pipeline(tmp_path, kafka_bootstrap, kafka_topic, pg_dsn, pg_schema):
    """``make(lock_ms, produced)``: the query script's config, the first ``produced`` of the N
    records produced to a new topic, a new share group whose records are locked for ``lock_ms``."""

    def make(lock_ms: int, produced: int = N) -> dict:
        topic = kafka_topic(partitions=PARTITIONS)
        group = share_group(kafka_bootstrap, share_record_lock_duration_ms=str(lock_ms))
        for at in range(0, produced, CHUNK):  # a record batch each: a poll acquires some, not all
            produce(kafka_bootstrap, topic, CHUNK, partitions=PARTITIONS, values=VALUES[at:at + CHUNK])
        return {"bootstrap": kafka_bootstrap, "topic": topic, "group": group,
                "checkpoint": str(tmp_path / "cp"), "pgDsn": pg_dsn, "schema": pg_schema, "table": "out",
                "sinkId": f"share-{uuid.uuid4().hex[:8]}", "total": N, "absorb": 0}

    yield make
    rollback_prepared_in_schema(pg_dsn, pg_schema)  # a failed test's leftovers would block DROP SCHEMA


def _kill(c: dict, fault: str, tmp_path: Path):
    killed = run_script(SCRIPT, json.dumps(c), fault=fault, state_dir=tmp_path)
    assert killed.killed, f"{fault} was not reached (rc={killed.returncode}):\n{killed.output[-3000:]}"
    return killed


def _check_once(c: dict, ids: Counter) -> None:
    """``ids`` are every record once; nothing prepared is left; every record was ACCEPTed."""
    assert ids == Counter(v.decode() for v in VALUES)  # 0 lost, 0 duplicated
    assert prepared_with_prefix(c["pgDsn"], f"jetspark:{c['sinkId']}:") == []
    assert leftovers(c["bootstrap"], c["group"], c["topic"], PARTITIONS) == []


# (fault, the batches in Spark's offset log and commit log at the kill, the batch whose records
# the dead member held and the restarted query must absorb when they come back, the lock). A
# point in the first batch keeps the broker's least lock (15 s: the time each test waits for the
# dead member's records); one after it has the broker's default (30 s): a loaded machine's first
# batch took 21 s, and a batch that outlives its locks is redelivered before the kill.
KILLS = [
    # batch 0 committed and ACCEPTed, batch 1 acquired, not yet in the offset log: its records
    # come back (deliveryCount 2) and are written once
    pytest.param("kafkashare.after_acquire@2", {0}, {0}, None, 30_000, marks=pytest.mark.soak,
                 id="after-acquire"),
    # batch 0 in the offset log, not run: replayed by offset, its redeliveries absorbed
    pytest.param("kafkashare.before_batch@1", {0}, set(), 0, 15_000, id="before-batch"),
    # batch 0 committed by Spark, not ACCEPTed: its redeliveries absorbed
    pytest.param("kafkashare.before_accept@1", {0}, {0}, 0, 30_000, marks=pytest.mark.soak,
                 id="before-accept"),
    # batch 0's ACCEPT confirmed by the broker, batch 1 not acquired: nothing comes back
    pytest.param("kafkashare.after_accept@1", {0}, {0}, None, 30_000, marks=pytest.mark.soak,
                 id="after-accept"),
]


@pytest.mark.parametrize(("fault", "offsets", "commits", "held", "lock_ms"), KILLS)
def test_driver_killed_at_each_point_writes_every_record_once(pipeline, tmp_path, fault, offsets, commits,
                                                              held, lock_ms):
    c = pipeline(lock_ms)
    checkpoint = Path(c["checkpoint"])
    killed = _kill(c, fault, tmp_path)
    assert (_logged(checkpoint, "offsets"), _logged(checkpoint, "commits")) == (offsets, commits)
    if held is not None:  # its rows, and its records that were redeliveries (a lock expired before)
        batch = _logged_offset(checkpoint, held)
        c["absorb"] = count(batch["acquired"]) + count(batch["absorbed"])
        assert c["absorb"] > 0
    restarted = run_script(SCRIPT, json.dumps(c), state_dir=tmp_path).check_ok()
    counts = id_counts(c["pgDsn"], c["schema"], "out")
    _check_once(c, counts)
    absorbed = _absorbed(restarted.output)
    if held is not None:
        assert absorbed >= c["absorb"]  # more when a slow batch lost its locks: those are absorbed too
    elif not any(LOCK_LOST in run.output for run in (killed, restarted)):
        assert absorbed == 0, restarted.output[-3000:]  # a confirmed ACCEPT never comes back
    if fault.startswith("kafkashare.after_acquire"):  # the dead member's batch was handed out again
        assert _delivery_counts(c) - {1}, "no record was redelivered"


def _delivery_counts(c: dict) -> set[int]:
    with psycopg.connect(c["pgDsn"]) as conn:
        return {r[0] for r in conn.execute(sql.SQL('SELECT DISTINCT "deliveryCount" FROM {}').format(
            sql.Identifier(c["schema"], "out"))).fetchall()}


@pytest.mark.soak
def test_a_plain_share_consumer_beside_the_restarted_query_takes_other_records(pipeline, tmp_path):
    """Killed with batch 1 acquired and not yet in the offset log, the query restarts beside a
    plain share consumer of the same group (which writes what it takes to a table of its own,
    then ACCEPTs it), and the rest of the records are produced a chunk at a time, each once the
    previous one is written, so both members are asking when it comes: between them every
    record once, none in both, each member some. (Killed after a batch is in the offset log and
    before its ACCEPT, a record the dead member held may come back to the other member while
    the query replays or has written the batch: at least once across members, see the
    reference page.)"""
    c = pipeline(30_000, produced=N // 2)
    _kill(c, "kafkashare.after_acquire@2", tmp_path)
    before = id_counts(c["pgDsn"], c["schema"], "out")  # written by the killed run
    # the records acquired from now on keep their locks for the broker's longest (60 s): a batch
    # that outlived its locks would be redelivered to either member (see the reference page)
    configure_group(c["bootstrap"], c["group"], share_record_lock_duration_ms="60000")
    with psycopg.connect(c["pgDsn"], autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (id text)").format(sql.Identifier(c["schema"], "taken")))
    c["alsoCount"] = ["taken"]
    restarted = start_script(SCRIPT, json.dumps(c), state_dir=tmp_path)
    other = PlainShareConsumer(c["bootstrap"], c["group"], c["topic"], max_records=3)
    done, failed = threading.Event(), []

    def take() -> None:
        try:
            with psycopg.connect(c["pgDsn"], autocommit=True) as conn:
                taken = sql.Identifier(c["schema"], "taken")
                insert = sql.SQL("INSERT INTO {} (id) VALUES (%s)").format(taken)
                while not done.is_set():
                    known = len(other.values)
                    other.take()
                    with conn.cursor() as cur:
                        cur.executemany(insert, [(v.decode(),) for v in other.values[known:]])
        except BaseException as e:  # the test fails on it below
            failed.append(e)

    with restarted.killed_on_failure():
        taker = threading.Thread(target=take, daemon=True)
        taker.start()
        try:
            for at in range(N // 2, N, CHUNK // 2):
                chunk = VALUES[at:at + CHUNK // 2]
                produce(c["bootstrap"], c["topic"], len(chunk), partitions=PARTITIONS, values=chunk)
                _until_written(c, restarted, {v.decode() for v in chunk})
            run = restarted.wait()
        finally:
            done.set()
            taker.join(60)
            other.close()
    assert not failed, failed
    run.check_ok()
    query_ids = id_counts(c["pgDsn"], c["schema"], "out")
    other_ids = Counter(v.decode() for v in other.values)
    assert query_ids - before and other_ids, (query_ids - before, other_ids)  # both took part
    assert not set(query_ids) & set(other_ids)
    _check_once(c, query_ids + other_ids)


def _until_written(c: dict, started, ids: set[str], timeout_s: float = 240) -> None:
    """Until every one of ``ids`` is in the query's table or the plain consumer's (bounded:
    a failure, never a pass)."""
    deadline = time.monotonic() + timeout_s
    while True:
        with psycopg.connect(c["pgDsn"]) as conn:
            written = {r[0] for table in ("out", "taken") for r in conn.execute(
                sql.SQL("SELECT id FROM {}").format(sql.Identifier(c["schema"], table))).fetchall()}
        if ids <= written:
            return
        assert started.proc.poll() is None, f"the query ended first:\n{started.log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"not written within {timeout_s} s: {sorted(ids - written)}"
        time.sleep(0.2)
