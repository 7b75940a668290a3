"""Named fault-injection points: SIGKILL the whole driver at a chosen point.

Library code marks crash-relevant moments with ``point("sink.after_prepare")``. A test
runs a query in a subprocess with ``JETSPARK_FAULT=<name>[@<n>][:<scope>]`` (and
``JETSPARK_FAULT_STATE=<file>``); when the point is reached for the n-th time (default
1st), the process group — the driver JVM, its Python workers, the script — is killed with
SIGKILL, as a crashed machine would be. Hits are counted across processes in the state
file. The kill covers the whole *session* of the process that hits the point: PySpark's
worker daemon moves its workers into a process group of its own, but not into a new
session, so a point hit in an executor task of a local master or in the driver's commit
worker still takes down the driver JVM. The scope changes what dies:

* ``:worker`` — only the process that hits the point (a crashed Python worker: Spark
  retries the task).
* ``:executor`` — the executor JVM the process runs under (the first ``java`` among its
  ancestors, found through ``/proc``), then the process itself: a lost executor on a
  cluster (``spark://…``); Spark retries its tasks on another executor. A point reached
  under a JVM that is not an executor (the driver's, which is also the executor of a
  ``local`` master) raises :class:`FaultError` instead: killing the driver is the
  default scope's work.
* ``:hold`` — the process does not die but waits at the point: it creates
  ``<gate>.held`` and returns once the file ``<gate>`` (``JETSPARK_FAULT_GATE``) exists —
  a test holds one driver at a chosen point while it starts another. A hold may name
  several hits, ``<name>@2,3:hold``: hit n then waits on a gate of its own, ``<gate>-<n>``
  (see :func:`hold_gate`), so a test acts at each of them in turn.

An executor's Python workers see the environment of the executor, not of the driver's
script: a test arms them with ``spark.executorEnv.JETSPARK_FAULT`` (and ``…_STATE``),
as tests/faults_harness.py does. Without ``JETSPARK_FAULT`` a point costs one dictionary
lookup. The state and ``<gate>.held`` files are opened without following a symlink (they
may lie in a shared temporary folder, where another user could plant one) and made 0600.
"""

from __future__ import annotations

import os
import signal
import time

ENV_POINT = "JETSPARK_FAULT"
ENV_STATE = "JETSPARK_FAULT_STATE"
ENV_GATE = "JETSPARK_FAULT_GATE"
_NO_LINK = os.O_NOFOLLOW | os.O_CLOEXEC
EXECUTOR_CLASSES = "org.apache.spark.executor."
"""The package of every executor's main class (``CoarseGrainedExecutorBackend``, YARN's …)."""


class FaultError(RuntimeError):
    """A fault point is armed with a scope that cannot apply where it was reached."""


def point(name: str) -> None:
    """Crash here when ``JETSPARK_FAULT`` names this point and its hit count is reached."""
    spec = os.environ.get(ENV_POINT)
    if not spec:
        return
    spec, _, scope = spec.partition(":")
    target, _, nth = spec.partition("@")
    if target != name:
        return
    wanted = [int(n) for n in nth.split(",")] if nth else [1]
    if len(wanted) > 1 and scope != "hold":
        raise FaultError(f"fault point {name!r}: several hits ({nth}) are for :hold only")
    state = os.environ.get(ENV_STATE)
    hits = 1
    if state:
        fd = os.open(state, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NO_LINK, 0o600)
        try:
            os.write(fd, b".")
            # this hit's ordinal: where its own byte ended (an append is atomic), not the file's
            # size, which a hit in another process may have grown since (two tasks at once)
            hits = os.lseek(fd, 0, os.SEEK_CUR)
        finally:
            os.close(fd)
    if hits in wanted:
        if scope == "hold":
            gate = os.environ[ENV_GATE]
            _hold(hold_gate(gate, hits) if len(wanted) > 1 else gate)
            return
        if scope == "worker":
            os.kill(os.getpid(), signal.SIGKILL)
        if scope == "executor":
            os.kill(executor_jvm(name), signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)
        _kill_session(os.getsid(0))


def hold_gate(gate: str, hit: int) -> str:
    """The gate of hit ``hit`` of a hold armed at several hits (``<name>@2,3:hold``)."""
    return f"{gate}-{hit}"


def _hold(gate: str) -> None:
    """Say "held" and wait until the test opens the gate."""
    os.close(os.open(gate + ".held", os.O_WRONLY | os.O_CREAT | _NO_LINK, 0o600))
    while not os.path.exists(gate):
        time.sleep(0.05)


def _stat(pid: int, proc: str) -> tuple[str, int]:
    """The command name and parent pid of ``pid`` (from ``<proc>/<pid>/stat``)."""
    with open(f"{proc}/{pid}/stat", encoding="ascii", errors="replace") as f:
        text = f.read()
    comm = text[text.index("(") + 1 : text.rindex(")")]
    return comm, int(text.rsplit(")", 1)[1].split()[1])


def executor_jvm(name: str, pid: int | None = None, proc: str = "/proc") -> int:
    """The pid of the executor JVM that ``pid`` (default: this process) runs under: its
    first ancestor named ``java``, which must run an executor class; else :class:`FaultError`."""
    _, jvm = _stat(os.getpid() if pid is None else pid, proc)
    while jvm > 1:
        comm, parent = _stat(jvm, proc)
        if comm == "java":
            break
        jvm = parent
    else:
        raise FaultError(f"fault point {name!r} armed with :executor was reached outside a JVM")
    with open(f"{proc}/{jvm}/cmdline", "rb") as f:
        args = f.read().decode(errors="replace").split("\0")
    if not any(arg.startswith(EXECUTOR_CLASSES) for arg in args):
        raise FaultError(
            f"fault point {name!r} armed with :executor was reached under JVM {jvm}, which is not "
            f"an executor (the driver, or a local master's executor inside it): run the query on a "
            f"cluster (spark://…), or arm the point without a scope to kill the driver"
        )
    return jvm


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
