"""After ``pip install``, the jet* formats work by name: PySpark auto-registers them."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from tests.faults_harness import run_script

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).parent / "scripts" / "formats_autoregistered.py"


def test_formats_resolve_without_register(kafka_bootstrap, kafka_topic, pg_dsn, pg_schema, tmp_path):
    topic = kafka_topic(partitions=1)
    table = f"{pg_schema}.t_{uuid.uuid4().hex[:8]}"
    run = run_script(SCRIPT, kafka_bootstrap, topic, pg_dsn, table, state_dir=tmp_path).check_ok()
    assert "KAFKA ['v0', 'v1', 'v2', 'v3', 'v4']" in run.output, run.output[-3000:]
    assert re.findall(r"^JDBC (\d+)$", run.output, re.M) == ["3"], run.output[-3000:]
    assert re.findall(r"^RABBITMQ (\w+)$", run.output, re.M) == ["True"], run.output[-3000:]
