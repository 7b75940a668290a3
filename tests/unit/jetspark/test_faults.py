"""The fault-injection harness kills the whole process group at the n-th hit of a point."""

from __future__ import annotations

import re
import textwrap

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
