"""Hundreds of native consumers opened, read with and closed by concurrent threads, no hang.

The work runs in a child process bounded by ``subprocess.run(timeout=...)``: a hang (in
librdkafka's destroy, say) is a timeout there, not a pytest run that never ends.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.scripts.jetkafka_common import numbered, produce

pytestmark = pytest.mark.integration

CHILD = Path(__file__).parent / "scripts" / "native_stress_child.py"
ROOT = Path(__file__).parents[2]
CYCLES, THREADS = 300, 4
BOUND_S = 600  # far above the run time on a loaded 2-core machine; a hang never ends


def test_open_read_close_cycles_with_concurrent_readers(kafka_bootstrap, kafka_topic):
    topic = kafka_topic(2)
    produce(kafka_bootstrap, topic, numbered(0, 0, 60) + numbered(1, 0, 60))
    try:
        done = subprocess.run([sys.executable, str(CHILD), kafka_bootstrap, topic, str(CYCLES), str(THREADS)],
                              cwd=ROOT, capture_output=True, text=True, timeout=BOUND_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{CYCLES} open/read/close cycles did not end within {BOUND_S} s (stdout: {e.stdout!r})")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == f"ok {CYCLES}"
