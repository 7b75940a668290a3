"""Run a query script in a subprocess and kill it at a named fault point (jetspark.faults).

The script runs in a session of its own, so the SIGKILL of ``jetspark.faults.point``
takes down the driver JVM and every Python worker, and nothing else.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from jetspark.faults import ENV_GATE, ENV_POINT, ENV_STATE
from tests import jvm_startup


@dataclass(frozen=True)
class Run:
    returncode: int
    output: str

    @property
    def killed(self) -> bool:
        return self.returncode == -9

    def check_ok(self) -> Run:
        assert self.returncode == 0, f"query script failed ({self.returncode}):\n{self.output[-5000:]}"
        return self


def _script_env(fault: str | None, state_dir: Path, env: dict[str, str] | None) -> dict[str, str]:
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env.pop(ENV_POINT, None)
    if fault:
        state = state_dir / f"fault-{fault.replace('@', '-').replace(':', '-')}-{os.urandom(4).hex()}"
        full_env[ENV_POINT] = fault
        full_env[ENV_STATE] = str(state)
        _arm_executors(full_env)
    jvm_startup.quick_start(full_env)
    full_env["PYSPARK_PYTHON"] = sys.executable
    root = str(Path(__file__).resolve().parent.parent)
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, full_env.get("PYTHONPATH")]))
    return full_env


def _arm_executors(env: dict[str, str]) -> None:
    """The fault settings for the executors' Python workers too: on a cluster they run under
    the Worker's environment, not the script's (``spark.executorEnv.*``, given to the driver
    JVM that the script's session starts through ``PYSPARK_SUBMIT_ARGS``)."""
    confs = [
        f"--conf spark.executorEnv.{var}={shlex.quote(env[var])}"
        for var in (ENV_POINT, ENV_STATE, ENV_GATE)
        if var in env
    ]
    env["PYSPARK_SUBMIT_ARGS"] = " ".join([*confs, env.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell")])


@dataclass
class Started:
    """A query script running in a session of its own (see :func:`start_script`)."""

    proc: subprocess.Popen
    log: Path

    def wait(self, timeout_s: float = 300) -> Run:
        """Wait for the script's end (killing it after ``timeout_s``: a failure)."""
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
            raise AssertionError(
                f"query script timed out after {timeout_s} s:\n{self.log.read_text()[-5000:]}"
            ) from None
        finally:
            # Whatever the script left behind in its group (a dead JVM's Python workers).
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, 9)
        return Run(self.proc.returncode, self.log.read_text())

    def kill(self) -> None:
        """Kill the script's whole group (driver JVM, Python workers) and reap it."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, 9)
        self.proc.wait()

    @contextlib.contextmanager
    def killed_on_failure(self):
        """Within: a failing assertion kills the script, so a held driver never outlives its test."""
        try:
            yield self
        except BaseException:
            self.kill()
            raise


def start_script(
    script: Path | str,
    *args: str,
    fault: str | None = None,
    state_dir: Path,
    env: dict[str, str] | None = None,
) -> Started:
    """Start ``python script args…`` without waiting; with ``fault`` set, arm that point."""
    log = state_dir / f"run-{os.urandom(4).hex()}.log"
    with open(log, "w") as out_file:
        proc = subprocess.Popen(
            [sys.executable, str(script), *args],
            stdout=out_file, stderr=subprocess.STDOUT, env=_script_env(fault, state_dir, env),
            start_new_session=True, text=True,
        )
    return Started(proc, log)


def run_script(
    script: Path | str,
    *args: str,
    fault: str | None = None,
    state_dir: Path,
    env: dict[str, str] | None = None,
    timeout_s: float = 300,
) -> Run:
    """Run ``python script args…``; with ``fault`` set, arm that point (``name[@n]``)."""
    return start_script(script, *args, fault=fault, state_dir=state_dir, env=env).wait(timeout_s)


def wait_held(gate: Path, started: Started, timeout_s: float = 240) -> None:
    """Until the script armed with a ``:hold`` point says it is held there (it creates
    ``<gate>.held``); fail if it ended first."""
    held = Path(f"{gate}.held")
    deadline = time.monotonic() + timeout_s
    while not held.exists():
        if started.proc.poll() is not None:
            log = started.log.read_text()[-4000:]
            raise AssertionError(f"the script ended before its hold point:\n{log}")
        assert time.monotonic() < deadline, "the script did not reach its hold point"
        time.sleep(0.1)
