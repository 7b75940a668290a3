"""A process with open native Kafka consumers exits by itself, even when their broker is gone.

``make test`` once hung after its last test: the session had stopped Kafka, and the exiting
interpreter's deallocation of a pooled consumer blocked in librdkafka's destroy (joining its
threads) while the consumers kept reconnecting to the stopped broker. Now the reader closes
its pooled consumers at exit (and the test session before it stops Kafka), and the native
reader never destroys a consumer while the interpreter finalizes. A child process reproduces
the situation against a port that refuses connections; a hang is a ``subprocess.run`` timeout.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

CHILD = Path(__file__).parent / "scripts" / "native_exit_child.py"
ROOT = Path(__file__).parents[2]
EXIT_BOUND_S = 60  # a generous bound for start-up, 4 reads and exit; a hang never ends


def refused_port() -> int:
    """A local port nothing listens on (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_child(mode: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, str(CHILD), f"127.0.0.1:{refused_port()}", mode], cwd=ROOT,
                              capture_output=True, text=True, timeout=EXIT_BOUND_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the process with open native consumers did not exit within {EXIT_BOUND_S} s "
                    f"(stdout: {e.stdout!r})")


def destroyed(stderr: str) -> int:
    """Consumers librdkafka destroyed (its ``generic`` debug log)."""
    return stderr.count("Terminating instance")


def test_exit_closes_pooled_consumers_of_a_dead_broker():
    done = run_child("atexit")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "exiting"
    assert "Connection refused" in done.stderr  # the consumers did try the dead broker
    # the 4 pooled ones closed by the exit hook; the held one left alone at finalization
    assert destroyed(done.stderr) == 4, done.stderr[-3000:]


def test_finalization_never_destroys_a_consumer():
    done = run_child("finalize")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "exiting"
    assert destroyed(done.stderr) == 0, done.stderr[-3000:]
