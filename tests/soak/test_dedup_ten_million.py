"""Soak at production scale (``make soak`` only, in no slice of ``make test``): the queue
source's crash test with 10 million committed IDs in the dedup store — the driver is killed
before its acks and restarts on a store of that size; every message arrives once, and an ID
already in the store is dropped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jetspark.datasources.rabbitmq.dedup import DedupStore
from tests.faults_harness import run_script
from tests.integration.scripts.rabbitmq_common import pg_received, publish, wait_counts

pytestmark = [pytest.mark.integration, pytest.mark.soak, pytest.mark.soak_only]

SCRIPT = Path(__file__).resolve().parents[1] / "integration" / "scripts" / "rabbitmq_query.py"
STORED = 10_000_000


def test_driver_killed_and_restarted_with_ten_million_ids_in_the_retention(
    amqp_url, rabbit_queue, pg_dsn, pg_schema, tmp_path
):
    wal = tmp_path / "wal"
    store = DedupStore(str(wal), retention_ms=24 * 3_600_000)
    for seq, start in enumerate(range(0, STORED, 1_000_000), 1):
        store.add((f"old-{i:08d}" for i in range(start, start + 1_000_000)), end_seq=seq)
    assert len(store) == STORED and store.memory_used <= store.memory_bytes
    new = [f"m{i:03d}" for i in range(30)]
    publish(amqp_url, rabbit_queue, [*new[:15], "old-00004242", *new[15:]])  # one already committed
    args = (amqp_url, rabbit_queue, str(wal), str(tmp_path / "cp"), pg_dsn, pg_schema, "10")
    crashed = run_script(SCRIPT, *args, fault="rabbitmq.before_ack@1", state_dir=tmp_path)
    assert crashed.killed, crashed.output[-3000:]
    resumed = run_script(SCRIPT, *args, state_dir=tmp_path).check_ok()
    assert sorted(pg_received(pg_dsn, pg_schema)) == new  # each new message once, the old one dropped
    assert wait_counts(rabbit_queue, (0, 0)) == (0, 0)
    result = json.loads(next(li for li in resumed.output.splitlines() if li.startswith("RESULT "))[7:])
    assert result["counts"]["duplicates"] >= 1
