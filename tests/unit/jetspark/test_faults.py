"""The fault-injection harness kills the whole process group at the n-th hit of a point (or,
with a scope, the hitting process only, or the executor JVM above it)."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest

from jetspark import faults
from jetspark.faults import FaultError, executor_jvm
from tests.faults_harness import run_script


def _script(tmp_path):
    path = tmp_path / "points.py"
    path.write_text(textwrap.dedent("""
        import subprocess, sys
        from jetspark.faults import point
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print("child", child.pid, flush=True)
        for i in range(3):
            print("before", i, flush=True)
            point("demo.step")
        print("finished", flush=True)
    """))
    return path


def test_unarmed_points_do_nothing(tmp_path):
    run = run_script(_script(tmp_path), state_dir=tmp_path).check_ok()
    assert "finished" in run.output


def test_armed_point_kills_process_group_at_nth_hit(tmp_path):
    import os

    run = run_script(_script(tmp_path), fault="demo.step@2", state_dir=tmp_path)
    assert run.killed
    assert re.findall(r"^before (\d+)$", run.output, re.M) == ["0", "1"], run.output
    child = int(run.output.split("child ")[1].split()[0])
    # The grandchild was in the same process group: it is gone too (or a reaped zombie).
    try:
        os.kill(child, 0)
        with open(f"/proc/{child}/stat") as f:
            assert f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (ProcessLookupError, FileNotFoundError):
        pass


def test_other_point_names_do_not_fire(tmp_path):
    run = run_script(_script(tmp_path), fault="other.step", state_dir=tmp_path).check_ok()
    assert "finished" in run.output


def test_worker_scope_kills_only_the_hitting_process(tmp_path):
    path = tmp_path / "worker.py"
    path.write_text(textwrap.dedent("""
        import subprocess, sys
        code = "from jetspark.faults import point; point('task.step')"
        rc = subprocess.run([sys.executable, "-c", code]).returncode
        print("worker exit", rc, flush=True)
    """))
    run = run_script(path, fault="task.step:worker", state_dir=tmp_path).check_ok()
    assert re.findall(r"^worker exit (-?\d+)$", run.output, re.M) == ["-9"], run.output


def test_driver_scope_reaches_processes_in_another_group_of_the_session(tmp_path):
    # PySpark's daemon puts Python workers in a process group of their own; the kill
    # must still take down the driver (here: the script that started the worker).
    path = tmp_path / "daemon.py"
    path.write_text(textwrap.dedent("""
        import os, subprocess, sys
        code = "import os; os.setpgid(0, 0); from jetspark.faults import point; point('task.step')"
        subprocess.run([sys.executable, "-c", code])
        print("driver survived", flush=True)
    """))
    run = run_script(path, fault="task.step", state_dir=tmp_path)
    assert run.killed and "driver survived" not in run.output


POINT = "from jetspark.faults import point; point('task.step')"


def _fake_jvm_script(tmp_path, *jvm_args: str):
    """A script that starts a fake JVM (Python under the name ``java``, with ``jvm_args``),
    whose child — its Python worker — hits ``task.step`` and says how it ended."""
    java = tmp_path / "java"
    java.symlink_to(sys.executable)  # the process's command name is "java"
    worker = (f"import subprocess; "
              f"print('worker exit', subprocess.run([{sys.executable!r}, '-c', {POINT!r}]).returncode)")
    path = tmp_path / "executor.py"
    path.write_text(textwrap.dedent(f"""
        import subprocess
        jvm = subprocess.run([{str(java)!r}, "-c", {worker!r}, *{list(jvm_args)!r}])
        print("jvm exit", jvm.returncode, flush=True)
    """))
    return path


def test_executor_scope_kills_the_executor_jvm_above_the_worker(tmp_path):
    path = _fake_jvm_script(tmp_path, "org.apache.spark.executor.CoarseGrainedExecutorBackend")
    run = run_script(path, fault="task.step:executor", state_dir=tmp_path).check_ok()
    # the JVM died (SIGKILL) before its worker could say anything; the script (the driver) lives on
    assert re.findall(r"^jvm exit (-?\d+)$", run.output, re.M) == ["-9"], run.output
    assert "worker exit" not in run.output


def test_executor_scope_refuses_a_jvm_that_is_not_an_executor(tmp_path):
    path = _fake_jvm_script(tmp_path, "org.apache.spark.deploy.SparkSubmit")
    run = run_script(path, fault="task.step:executor", state_dir=tmp_path).check_ok()
    assert "FaultError" in run.output and "not an executor" in run.output, run.output
    assert re.findall(r"^worker exit (-?\d+)$", run.output, re.M) == ["1"], run.output
    assert re.findall(r"^jvm exit (-?\d+)$", run.output, re.M) == ["0"], run.output


def _proc(root, pid: int, comm: str, ppid: int, *args: str) -> None:
    """A process in a fake ``/proc`` under ``root``: its stat and cmdline files."""
    (root / str(pid)).mkdir(parents=True)
    (root / str(pid) / "stat").write_text(f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1\n")
    (root / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in args) + b"\0")


def test_executor_jvm_is_the_first_java_ancestor(tmp_path):
    root = tmp_path / "proc"
    _proc(root, 10, "java", 1, "java", "org.apache.spark.deploy.worker.Worker")
    _proc(root, 20, "java", 10, "/usr/bin/java", "-cp", "x",
          "org.apache.spark.executor.CoarseGrainedExecutorBackend")
    _proc(root, 30, "python3 (x)", 20, "python3", "-m", "pyspark.daemon")  # ")" in a command name
    _proc(root, 40, "python3", 30, "python3", "-m", "pyspark.daemon")
    assert executor_jvm("p", pid=40, proc=str(root)) == 20
    assert executor_jvm("p", pid=30, proc=str(root)) == 20


def test_executor_jvm_refuses_the_driver_and_a_process_outside_a_jvm(tmp_path):
    root = tmp_path / "proc"
    _proc(root, 10, "python3", 1, "python3", "query.py")
    _proc(root, 20, "java", 10, "java", "org.apache.spark.deploy.SparkSubmit", "pyspark-shell")
    _proc(root, 30, "python3", 20, "python3", "-m", "pyspark.daemon")
    with pytest.raises(FaultError, match="under JVM 20, which is not an executor"):
        executor_jvm("p", pid=30, proc=str(root))
    with pytest.raises(FaultError, match="outside a JVM"):
        executor_jvm("p", pid=10, proc=str(root))


def test_a_hit_counts_its_own_ordinal_when_another_process_hits_at_once(tmp_path, monkeypatch):
    """Two tasks reaching the point together: the second appends its hit before the first has
    counted. The first is still hit 1 and fires (counting the file's size, neither would)."""
    import os

    from jetspark import faults

    state = tmp_path / "state"
    monkeypatch.setenv(faults.ENV_POINT, "demo.step@1:worker")
    monkeypatch.setenv(faults.ENV_STATE, str(state))
    real_write = os.write

    def hit_then_another(fd: int, data: bytes) -> int:
        written = real_write(fd, data)
        with open(state, "ab") as other:  # the other process's hit, between our write and our count
            other.write(b".")
        return written

    fired: list[str] = []
    monkeypatch.setattr(faults.os, "write", hit_then_another)
    monkeypatch.setattr(faults.os, "kill", lambda pid, sig: fired.append("worker"))
    monkeypatch.setattr(faults, "_kill_session", lambda sid: fired.append("session"))
    faults.point("demo.step")
    assert fired[:1] == ["worker"] and state.stat().st_size == 2


@pytest.mark.parametrize("which", ["state", "held"])
def test_fault_files_are_never_written_through_a_planted_symlink(which, tmp_path, monkeypatch):
    victim = tmp_path / "victim"  # stands for a file of the user running the tests
    victim.write_text("keep\n")
    gate = tmp_path / "gate"
    gate.touch()  # open: a hold returns at once
    link = tmp_path / ("state" if which == "state" else "gate.held")
    link.symlink_to(victim)
    monkeypatch.setenv("JETSPARK_FAULT", "x:hold")
    monkeypatch.setenv("JETSPARK_FAULT_GATE", str(gate))
    monkeypatch.setenv("JETSPARK_FAULT_STATE", str(link if which == "state" else tmp_path / "hits"))
    with pytest.raises(OSError):
        faults.point("x")
    assert victim.read_text() == "keep\n" and link.is_symlink()


def test_a_hold_at_several_hits_waits_on_a_gate_per_hit(tmp_path, monkeypatch):
    gate = tmp_path / "gate"
    monkeypatch.setenv("JETSPARK_FAULT", "x@2,3:hold")
    monkeypatch.setenv("JETSPARK_FAULT_GATE", str(gate))
    monkeypatch.setenv("JETSPARK_FAULT_STATE", str(tmp_path / "hits"))
    for hit in (2, 3):
        Path(faults.hold_gate(str(gate), hit)).touch()  # open: the hold returns at once
    for _ in range(4):
        faults.point("x")
    held = sorted(p.name for p in tmp_path.glob("*.held"))
    assert held == ["gate-2.held", "gate-3.held"]  # hits 2 and 3 held, each at its own gate


def test_several_hits_are_refused_for_a_kill(tmp_path, monkeypatch):
    monkeypatch.setenv("JETSPARK_FAULT", "x@2,3")
    monkeypatch.setenv("JETSPARK_FAULT_STATE", str(tmp_path / "hits"))
    with pytest.raises(faults.FaultError, match="for :hold only"):
        faults.point("x")
