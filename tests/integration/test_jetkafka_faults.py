"""Kill the driver (and its Python workers) at jetkafka's fault points; restart; nothing lost or doubled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.faults_harness import run_script
from tests.integration.scripts.jetkafka_common import numbered, produce

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).parent / "scripts" / "jetkafka_query.py"
PARTITIONS, PER_PARTITION = 3, 40


def batches(out: Path) -> dict[int, list[dict]]:
    return {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in out.glob("batch-*.json")}


@pytest.mark.parametrize(
    "fault",
    ["jetkafka.latest_offset@3", "jetkafka.partitions@2", "jetkafka_test.in_batch@2",
     "jetkafka.read_chunk@7", "jetkafka.read_chunk@7:worker"],
    ids=["between-batches", "after-offset-logged", "mid-batch", "driver-dies-mid-read",
         "worker-dies-mid-read"],
)
def test_killed_query_restarts_without_loss_or_duplicates(kafka_bootstrap, kafka_topic, tmp_path, fault):
    """The driver killed (SIGKILL of its whole session) at a point, or with ``:worker`` only
    the Python worker reading Kafka mid-read (the task fails, and with it the query in
    local mode); either way a restart from the checkpoint completes exactly."""
    topic = kafka_topic(PARTITIONS)
    records = [r for p in range(PARTITIONS) for r in numbered(p, 0, PER_PARTITION)]
    produce(kafka_bootstrap, topic, records)
    out = tmp_path / "out"
    out.mkdir()
    args = (kafka_bootstrap, topic, str(tmp_path / "checkpoint"), str(out), "30")

    crashed = run_script(SCRIPT, *args, fault=fault, state_dir=tmp_path)
    if fault.endswith(":worker"):
        assert crashed.returncode != 0 and "DONE" not in crashed.output
    else:
        assert crashed.killed, crashed.output[-3000:]
    before = batches(out)
    run_script(SCRIPT, *args, state_dir=tmp_path).check_ok()
    after = batches(out)

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
