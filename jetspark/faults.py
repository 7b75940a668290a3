"""Named fault-injection points: SIGKILL the whole driver at a chosen point.

Library code marks crash-relevant moments with ``point("sink.after_prepare")``. A test
runs a query in a subprocess with ``JETSPARK_FAULT=<name>[@<n>][:worker]`` (and
``JETSPARK_FAULT_STATE=<file>``); when the point is reached for the n-th time (default
1st), the process group — the driver JVM, its Python workers, the script — is killed with
SIGKILL, as a crashed machine would be. Hits are counted across processes in the state
file. The kill covers the whole *session* of the process that hits the point: PySpark's
worker daemon moves its workers into a process group of its own, but not into a new
session, so a point hit in an executor task or in the driver's commit worker still takes
down the driver JVM. With the ``:worker`` suffix only the process that hits the point
dies (a crashed Python worker: Spark retries the task). With ``:hold`` the process
that hits the point does not die but waits there: it creates ``<gate>.held`` and returns
once the file ``<gate>`` (``JETSPARK_FAULT_GATE``) exists — a test holds one driver at a
chosen point while it starts another. Without ``JETSPARK_FAULT`` a point costs one
dictionary lookup.
"""

from __future__ import annotations

import os
import signal
import time

ENV_POINT = "JETSPARK_FAULT"
ENV_STATE = "JETSPARK_FAULT_STATE"
ENV_GATE = "JETSPARK_FAULT_GATE"


def point(name: str) -> None:
    """Crash here when ``JETSPARK_FAULT`` names this point and its hit count is reached."""
    spec = os.environ.get(ENV_POINT)
    if not spec:
        return
    spec, _, scope = spec.partition(":")
    target, _, nth = spec.partition("@")
    if target != name:
        return
    wanted = int(nth) if nth else 1
    state = os.environ.get(ENV_STATE)
    hits = 1
    if state:
        fd = os.open(state, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, b".")
        finally:
            os.close(fd)
        hits = os.path.getsize(state)
    if hits == wanted:
        if scope == "hold":
            _hold(os.environ[ENV_GATE])
            return
        if scope == "worker":
            os.kill(os.getpid(), signal.SIGKILL)
        _kill_session(os.getsid(0))


def _hold(gate: str) -> None:
    """Say "held" and wait until the test opens the gate."""
    with open(gate + ".held", "w"):
        pass
    while not os.path.exists(gate):
        time.sleep(0.05)


def _kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid``, this one last."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid:
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            continue
    os.kill(me, signal.SIGKILL)
