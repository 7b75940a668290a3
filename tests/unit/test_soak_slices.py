"""The soak slices (tests/soak_slices.py): any ``SLICES`` consecutive runs take every soak case once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import soak_slices

ROOT = Path(__file__).resolve().parents[2]

# The soak cases in no slice, only in make soak: production scale, longer than a slice's budget.
SOAK_ONLY = {
    "tests/soak/test_dedup_ten_million.py::"
    "test_driver_killed_and_restarted_with_ten_million_ids_in_the_retention",
    "tests/integration/test_demo_cluster.py::test_demo_submitted_to_a_cluster_equals_the_local_run",
}

_DUMP = '''
import json, os
def pytest_collection_finish(session):
    with open(os.environ["SOAK_DUMP"], "w") as out:
        json.dump([[item.nodeid, bool(item.get_closest_marker("soak_only"))] for item in session.items], out)
'''


def _collect(cwd: Path, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> list[list]:
    """The node ids (and whether soak_only) a run collects in ``cwd``, through a plugin that writes them."""
    (tmp_path / "soak_dump.py").write_text(_DUMP)
    dump = tmp_path / "collected.json"
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
               "SOAK_DUMP": str(dump), **(env or {})}
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "soak_dump",
                           "-p", "no:cacheprovider", *args], cwd=cwd, env=environ, capture_output=True,
                          text=True, timeout=600)
    errors = done.stdout.find("= ERRORS =")
    assert done.returncode == 0, "the collection failed:\n" + (
        done.stdout[errors:errors + 3000] if errors >= 0 else done.stdout[-3000:]) + done.stderr[-3000:]
    return json.loads(dump.read_text())


def test_every_soak_case_of_the_suite_is_in_exactly_one_slice_or_soak_only(tmp_path):
    """Collected as a run does (``--collect-only``, which writes no class-data archive either)."""
    cache = tmp_path / "cache"
    collected = dict(_collect(ROOT, tmp_path, "-m", "soak", "tests/soak", "tests/integration",
                              env={"XDG_CACHE_HOME": str(cache)}))
    assert not (cache / "jetspark" / "cds").exists()  # tests/jvm_startup.py: left to a run of tests
    assert {node for node, only in collected.items() if only} == SOAK_ONLY
    sliced = sorted(node for node, only in collected.items() if not only)
    assert len(sliced) >= 55  # every crash point the soak marker holds (issue 49 counted 57 soak cases)
    slices = soak_slices.SLICES
    runs = [soak_slices.select(collected, soak_slices.Choice("slice", i, slices)) for i in range(slices)]
    assert sorted(node for run in runs for node in run) == sliced  # each once, none left out
    assert max(map(len, runs)) - min(map(len, runs)) <= 1


def test_assign_is_round_robin_over_the_sorted_ids():
    assert soak_slices.assign(["c", "a", "d", "b", "e"], 2) == {"a": 0, "b": 1, "c": 0, "d": 1, "e": 0}


CASES = {"t.py::plain_is_no_soak_case": False, **{f"t.py::crash[{n}]": False for n in range(7)},
         "t.py::big": True}


def test_k_slices_take_every_sliced_case_once_and_no_soak_only_one():
    runs = [soak_slices.select(CASES, soak_slices.Choice("slice", i, 3)) for i in range(3)]
    assert sorted(node for run in runs for node in run) == sorted(n for n, only in CASES.items() if not only)


def test_all_and_none():
    assert soak_slices.select(CASES, soak_slices.Choice("all")) == set(CASES)
    assert soak_slices.select(CASES, soak_slices.Choice("none")) == set()


_TESTS = '''
import pytest

def test_plain():
    pass

@pytest.mark.soak
@pytest.mark.parametrize("n", range(3))
def test_crash(n):
    pass

@pytest.mark.soak
@pytest.mark.soak_only
def test_big():
    pass
'''


def test_a_run_deselects_the_soak_cases_outside_its_slice_and_a_mark_expression_decides_alone(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "pytest.ini").write_text("[pytest]\nmarkers =\n    soak: s\n    soak_only: o\n")
    (tree / "test_cases.py").write_text(_TESTS)
    (tree / "conftest.py").write_text("from tests.soak_slices import (pytest_collection_modifyitems, "
                                      "pytest_report_header, pytest_terminal_summary)\n")
    nodes = [n for n, _ in _collect(tree, tmp_path, env={soak_slices.ENV: "1/3"})]
    assert nodes == ["test_cases.py::test_plain", "test_cases.py::test_crash[1]"]
    nodes = [n for n, _ in _collect(tree, tmp_path, "-m", "soak", env={soak_slices.ENV: "none"})]
    assert len(nodes) == 4


def test_the_submission_round_chooses_the_slice_without_the_variable():
    number = soak_slices.read_round(ROOT)
    choice = soak_slices.choose(ROOT, env={})
    slices = soak_slices.SLICES
    assert (choice.mode, choice.index, choice.slices) == ("slice", number % slices, slices)


def test_advancing_the_round_moves_the_next_run_to_the_next_slice_and_keeps_the_comments(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / soak_slices.ROUND_FILE).write_text("# why\n13\n")
    before = soak_slices.choose(tmp_path, env={})
    assert soak_slices.advance_round(tmp_path) == 14
    after = soak_slices.choose(tmp_path, env={})
    assert after.index == (before.index + 1) % soak_slices.SLICES
    assert (tmp_path / soak_slices.ROUND_FILE).read_text() == "# why\n14\n"


def test_a_round_file_without_a_number_is_refused_by_name(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / soak_slices.ROUND_FILE).write_text("# nothing\nsoon\n")
    with pytest.raises(pytest.UsageError, match="tests/soak_round holds no round number"):
        soak_slices.choose(tmp_path, env={})


@pytest.mark.parametrize("value", ["3/3", "x", "1/", "-1/2"])
def test_a_bad_value_is_refused_by_name(value):
    with pytest.raises(pytest.UsageError, match=f"{soak_slices.ENV}=.*expected I/K"):
        soak_slices.parse(value)
