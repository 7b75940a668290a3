"""The fault harness (tests/faults_harness.py): a held script never outlives a failed check."""

from __future__ import annotations

import pytest

from tests.faults_harness import start_script


def test_a_failed_check_kills_the_script_and_reaps_it(tmp_path):
    script = tmp_path / "held.py"
    script.write_text("import time\ntime.sleep(600)\n")
    started = start_script(script, state_dir=tmp_path)
    with pytest.raises(AssertionError, match="the check"), started.killed_on_failure():
        raise AssertionError("the check")
    assert started.proc.returncode == -9


def test_without_a_failure_the_script_runs_on(tmp_path):
    script = tmp_path / "quick.py"
    script.write_text("import sys\nprint('ran', sys.argv[1])\n")
    started = start_script(script, "once", state_dir=tmp_path)
    with started.killed_on_failure():
        run = started.wait(120)
    assert run.returncode == 0 and "ran once" in run.output, run.output
