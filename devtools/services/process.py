"""Detached local service processes: start, wait for readiness, stop by pid.

A service runs in a session (process group) of its own, so it outlives the Python
process that started it and can be stopped as a whole (its children included) by the
recorded process-group id. Nothing here knows about Kafka, PostgreSQL or RabbitMQ.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from jetspark.devtools.services.files import open_nofollow
from jetspark.errors import ServiceError


@dataclass(frozen=True)
class ProcessRecord:
    """A process this library started: enough to find it again and stop it."""

    pid: int
    log: str
    stop_signal: int = signal.SIGTERM

    def alive(self) -> bool:
        return pid_alive(self.pid)


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def log_tail(path: str | Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a log file, or a note that it is missing."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64_000))
            text = f.read().decode("utf-8", errors="replace")
    except OSError as e:
        return f"(no log at {path}: {e.strerror})"
    return "\n".join(text.splitlines()[-lines:])


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now.

    Chosen below the kernel's ephemeral range, so that no client connection (our own
    readiness probes included) can take it between choosing and binding it, and never
    one this process handed out before: services start in parallel, and two of them
    choosing the same port before either binds it would collide.
    """
    high = max(_ephemeral_low(), 10_001)
    for _ in range(200):
        port = random.randrange(10_000, high)
        with _handed_out_lock:
            if port in _handed_out:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            if not port_open(port):
                _handed_out.add(port)
                return port
    raise ServiceError("no free TCP port found on 127.0.0.1 below the ephemeral range")


def ensure_port_free(port: int, service: str) -> None:
    """Fail with a message naming the service when ``port`` is taken on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # Servers bind with SO_REUSEADDR: a port left in TIME_WAIT by a stopped one is free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            raise ServiceError(
                f"{service}: port 127.0.0.1:{port} is already in use ({e.strerror}); "
                "stop what listens there or let jetspark pick a free port"
            ) from None


def port_open(port: int, host: str = "127.0.0.1", timeout_s: float = 0.5) -> bool:
    """Whether something accepts a TCP connection at ``host:port`` (a name that does not
    resolve: False)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        try:
            return s.connect_ex((host, port)) == 0
        except OSError:
            return False


def spawn(
    argv: Sequence[str],
    *,
    log: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    user: str | None = None,
    stop_signal: int = signal.SIGTERM,
) -> ProcessRecord:
    """Start ``argv`` detached in its own session, stdout+stderr appended to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    with open_nofollow(log, "ab") as out:
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=full_env,
                cwd=cwd,
                start_new_session=True,
                user=user,
            )
        except FileNotFoundError as e:
            raise ServiceError(f"cannot start {argv[0]}: {e.strerror}") from None
    # The Popen object is dropped on purpose: the service must outlive this process.
    # Reap it in the background if it dies while we still run, so it never lingers
    # as a zombie that looks alive.
    _reapers.append(proc)
    return ProcessRecord(pid=proc.pid, log=str(log), stop_signal=stop_signal)


_reapers: list[subprocess.Popen] = []


def _reap() -> None:
    for proc in list(_reapers):
        if proc.poll() is not None:
            _reapers.remove(proc)


def wait_ready(
    service: str,
    record: ProcessRecord,
    probe: Callable[[], object],
    *,
    timeout_s: float,
) -> None:
    """Poll ``probe`` until it succeeds; fail with the log tail if the process dies first.

    ``probe`` raises while the service is not ready. This is service start-up, not test
    synchronisation: it polls with a short back-off until the deadline.
    """
    deadline = time.monotonic() + timeout_s
    last_error: BaseException | None = None
    delay = 0.1
    while True:
        _reap()
        if not record.alive():
            raise ServiceError(
                f"{service} exited during start-up (pid {record.pid}); last log lines of "
                f"{record.log}:\n{log_tail(record.log)}"
            )
        try:
            probe()
            return
        except Exception as e:
            last_error = e
        if time.monotonic() >= deadline:
            stop(record)
            raise ServiceError(
                f"{service} did not become ready within {timeout_s:.0f} s "
                f"(last probe error: {last_error!r}); last log lines of {record.log}:\n"
                f"{log_tail(record.log)}"
            )
        time.sleep(delay)
        delay = min(delay * 1.5, 1.0)


def stop(record: ProcessRecord, *, grace_s: float = 20.0) -> None:
    """Stop ``record``: its stop signal to the leader, then SIGKILL to the group.

    The leader gets ``record.stop_signal`` (a graceful shutdown: PostgreSQL's "fast"
    SIGINT, the JVM's and Erlang's SIGTERM); whatever of its process group is still
    alive after ``grace_s`` is killed.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(record.pid, record.stop_signal)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap()
        if not record.alive() and not _group_alive(record.pid):
            return
        time.sleep(0.1)
    _signal_group(record.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (record.alive() or _group_alive(record.pid)):
        _reap()
        time.sleep(0.05)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    # Zombies still count for killpg; check /proc for a live member.
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False
