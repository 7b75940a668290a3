"""Kill the driver (and its Python workers) at jetkafka's fault points; restart; nothing lost or doubled."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from tests.faults_harness import run_script
from tests.integration.scripts.jetkafka_common import numbered, produce

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).parent / "scripts" / "jetkafka_query.py"
PARTITIONS, PER_PARTITION = 3, 40
CHUNK_ROWS = 5
"""The script's ``maxRecordsPerChunk``: a read task hits ``jetkafka.read_chunk`` at least once
per 5 records of its range."""
WORKER_HIT = 7
WORKER_CRASH = re.compile(
    r"\[batchId = (\d+)\] Lost task [^\n]*Python worker exited unexpectedly \(crashed\)")


def batches(out: Path) -> dict[int, list[dict]]:
    return {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in out.glob("batch-*.json")}


def logged_offsets(checkpoint: Path, topic: str) -> dict[int, dict[int, int]]:
    """Each batch's end offsets per partition, as the offset log holds them."""
    logged = {}
    for path in (checkpoint / "offsets").iterdir():
        if path.name.isdigit():
            source = json.loads(path.read_text().splitlines()[2])
            logged[int(path.name)] = {int(p): o for p, o in source["offsets"][topic].items()}
    return logged


def committed(checkpoint: Path) -> set[int]:
    return {int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()}


def assert_worker_died_at_the_armed_hit(crashed_output: str, tmp_path: Path, checkpoint: Path,
                                        topic: str) -> int:
    """A Python worker crashed in the batch that reached the armed hit; returns that batch."""
    hits = [f.stat().st_size for f in tmp_path.glob("fault-*")]  # jetspark.faults counts hits so
    assert len(hits) == 1 and hits[0] >= WORKER_HIT, f"the armed hit was not reached: {hits}"
    offsets, done = logged_offsets(checkpoint, topic), committed(checkpoint)
    pending = sorted(set(offsets) - done)
    assert len(pending) == 1, f"offset log {sorted(offsets)}, commits {sorted(done)}"
    crashed_in = {int(b) for b in WORKER_CRASH.findall(crashed_output)}
    assert crashed_in == set(pending), f"worker crashes in batches {crashed_in}:\n{crashed_output[-3000:]}"

    def chunks(batch: int) -> int:  # the fewest read_chunk hits the batch's ranges make
        start = offsets.get(batch - 1, dict.fromkeys(range(PARTITIONS), 0))
        return sum(math.ceil((end - start[p]) / CHUNK_ROWS) for p, end in offsets[batch].items())

    before = sum(chunks(b) for b in done)
    assert before < WORKER_HIT, f"the committed batches made {before}+ hits: the crash came late"
    return pending[0]


_SOAK = pytest.mark.soak  # the suite's time budget: make test kills after the offsets are logged
# (an executor is lost mid-read in test_service_faults_executors.py); the other points are soak
# cases, a slice a run, and make soak kills at every point


@pytest.mark.parametrize(
    "fault",
    [pytest.param("jetkafka.latest_offset@3", id="between-batches", marks=_SOAK),
     pytest.param("jetkafka.partitions@2", id="after-offset-logged"),
     pytest.param("jetkafka_test.in_batch@2", id="mid-batch", marks=_SOAK),
     pytest.param("jetkafka.read_chunk@7", id="driver-dies-mid-read", marks=_SOAK),
     pytest.param(f"jetkafka.read_chunk@{WORKER_HIT}:worker", id="worker-dies-mid-read", marks=_SOAK)],
)
def test_killed_query_restarts_without_loss_or_duplicates(kafka_bootstrap, kafka_topic, tmp_path, fault):
    """The driver killed (SIGKILL of its whole session) at a point, or with ``:worker`` only
    the Python worker reading Kafka mid-read (the task fails, and with it the query in
    local mode); either way a restart from the checkpoint completes exactly. A worker must
    die at the armed hit, and the restart re-run that batch over the offsets it had logged."""
    topic = kafka_topic(PARTITIONS)
    records = [r for p in range(PARTITIONS) for r in numbered(p, 0, PER_PARTITION)]
    produce(kafka_bootstrap, topic, records)
    out = tmp_path / "out"
    out.mkdir()
    checkpoint = tmp_path / "checkpoint"
    args = (kafka_bootstrap, topic, str(checkpoint), str(out), "30")

    crashed = run_script(SCRIPT, *args, fault=fault, state_dir=tmp_path)
    retried = None
    if fault.endswith(":worker"):
        assert crashed.returncode != 0 and "DONE" not in crashed.output
        retried = assert_worker_died_at_the_armed_hit(crashed.output, tmp_path, checkpoint, topic)
        planned = logged_offsets(checkpoint, topic)
    else:
        assert crashed.killed, crashed.output[-3000:]
    before = batches(out)
    run_script(SCRIPT, *args, state_dir=tmp_path).check_ok()
    after = batches(out)

    if retried is not None:  # the re-run batch read exactly the range the crashed one had logged
        assert logged_offsets(checkpoint, topic)[retried] == planned[retried]
        start = planned.get(retried - 1, dict.fromkeys(range(PARTITIONS), 0))
        assert sorted((r["partition"], r["offset"]) for r in after[retried]) == \
            [(p, o) for p in sorted(planned[retried]) for o in range(start[p], planned[retried][p])]

    assert set(before) <= set(after) and len(after) >= 4
    for batch_id, rows in before.items():  # a committed batch is never re-run differently
        if batch_id < max(before):
            assert sorted(map(json.dumps, rows)) == sorted(map(json.dumps, after[batch_id]))
    seen = [(r["partition"], r["offset"], r["key"]) for rows in after.values() for r in rows]
    assert len(seen) == len(set(seen)), "duplicates"
    assert sorted(seen) == sorted((p, int(k.decode().split("-")[1]), k.decode()) for p, k, _, _ in records)
    ws = [max((r["watermark"] for r in after[b] if r["watermark"]), default=None) for b in sorted(after)]
    ws = [w for w in ws if w is not None]
    assert ws == sorted(ws), "watermark went back"
