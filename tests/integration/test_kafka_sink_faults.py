"""The Kafka sink under crashes: the driver is SIGKILLed at each sink fault point, the query
is restarted on the same checkpoint until it completes; a read_committed consumer sees every
record once, although the aborted transactions' records are in the log. Records Kafka refuses
are among them: their dead letters, written in the tasks' transactions, land once too."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.faults_harness import run_script
from tests.integration.scripts.sink_kafka_read import read_topic

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).parent / "scripts" / "sink_kafka_query.py"
TOTAL, STEP = 40, 20  # two micro-batches of two partitions each


def _ids(records) -> Counter:
    return Counter(int(k) for k, *_ in records)


KILLS = [
    "sink.during_write@1",     # a transaction is open with some records in the log
    "sink.after_prepare@2",    # records flushed and the marker sent, not committed
    "sink.after_commit@1",     # the tasks committed (dead letters in), Spark has not recorded the batch
    "sink.during_recovery@1",  # the replayed batch 1 finds its markers committed
]


@pytest.mark.parametrize("kills", [
    pytest.param(KILLS[2:], id="after-commit-recovery"),  # make test: the suite's time budget
    pytest.param(KILLS, id="every-point", marks=pytest.mark.soak),
])
def test_exactly_once_survives_driver_kills_at_every_point(kafka_bootstrap, kafka_topic, tmp_path, kills):
    """Every task refuses two records (ids ending in 3 and 7 name a partition the topic lacks);
    the kill at sink.after_commit comes after the tasks committed their dead letters and before
    Spark records the batch. Good records and dead letters each land once: multisets."""
    topic, dead = kafka_topic(partitions=2), kafka_topic()
    args = [kafka_bootstrap, topic, str(tmp_path / "checkpoint"), "task", str(TOTAL), str(STEP), dead]
    refused = [i for i in range(TOTAL) if i % 10 in (3, 7)]
    for fault in kills:
        letters_before = sum(_ids(read_topic(kafka_bootstrap, dead)).values())
        run = run_script(SCRIPT, *args, fault=fault, state_dir=tmp_path)
        assert run.killed, f"{fault} was not reached (rc={run.returncode}):\n{run.output[-3000:]}"
        if fault == "sink.after_commit@1":  # the killed run committed a task's dead letters first
            assert sum(_ids(read_topic(kafka_bootstrap, dead)).values()) > letters_before
    run_script(SCRIPT, *args, state_dir=tmp_path).check_ok()
    assert _ids(read_topic(kafka_bootstrap, topic)) == Counter(i for i in range(TOTAL) if i not in refused)
    assert _ids(read_topic(kafka_bootstrap, dead)) == Counter(refused)
    if "sink.during_write@1" in kills:  # a killed open transaction left aborted copies, read_committed skips
        everything = _ids(read_topic(kafka_bootstrap, topic, "read_uncommitted"))
        assert sum(everything.values()) > TOTAL - len(refused)
        assert sum(_ids(read_topic(kafka_bootstrap, dead, "read_uncommitted")).values()) > len(refused)
