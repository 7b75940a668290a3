"""A process with open native Kafka consumers exits by itself, even when their broker is gone.

``make test`` once hung after its last test: the session had stopped Kafka, and the exiting
interpreter's deallocation of a pooled consumer blocked in librdkafka's destroy (joining its
threads) while the consumers kept reconnecting to the stopped broker. Now the reader closes
its pooled consumers at exit (and the test session before it stops Kafka), and the native
reader never destroys a consumer while the interpreter finalizes. A child process reproduces
the situation against a port that refuses connections; a hang is a ``subprocess.run`` timeout.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from jetspark.devtools.services.process import free_port

pytestmark = pytest.mark.integration

CHILD = Path(__file__).parent / "scripts" / "native_exit_child.py"
ROOT = Path(__file__).parents[2]
EXIT_BOUND_S = 60  # a generous bound for start-up, 4 reads and exit; a hang never ends


def refused_port() -> int:
    """A local port nothing listens on (connections are refused), below the ephemeral range
    so that no reconnect's own source port can be it (a TCP self-connection would answer)."""
    return free_port()


def run_child(mode: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, str(CHILD), f"127.0.0.1:{refused_port()}", mode], cwd=ROOT,
                              capture_output=True, text=True, timeout=EXIT_BOUND_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the process with open native consumers did not exit within {EXIT_BOUND_S} s "
                    f"(stdout: {e.stdout!r})")


DESTROY = re.compile(r"\|DESTROY\|([\w-]+)#consumer-\d+\| \[thrd:app\]: Terminating instance")


def destroyed(stderr: str) -> list[str]:
    """client.ids of the consumers librdkafka destroyed (its ``generic`` debug log), sorted."""
    return sorted(DESTROY.findall(stderr))


def test_exit_closes_pooled_consumers_of_a_dead_broker():
    done = run_child("atexit")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "exiting"
    assert "Connection refused" in done.stderr  # the consumers did try the dead broker
    # the control one closed by hand, the 4 pooled ones by the exit hook; the held one left alone
    assert destroyed(done.stderr) == ["control", "pooled-0", "pooled-1", "pooled-2", "pooled-3"], \
        done.stderr[-3000:]


def test_finalization_never_destroys_a_consumer():
    done = run_child("finalize")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "exiting"
    # only the control consumer, closed by hand before exit: the log does report destroys, and
    # finalization destroyed none of the 4 pooled consumers nor the held one
    assert destroyed(done.stderr) == ["control"], done.stderr[-3000:]
