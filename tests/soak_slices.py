"""Every soak case in CI over a window of commits: each test run takes one slice of them.

The soak cases (``@pytest.mark.soak``: every crash point, repeated) do not fit one run of the
suite's time budget, so a run without ``-m`` takes one of ``SLICES`` slices: slice
``round mod SLICES``, where ``round`` is the number in ``tests/soak_round``. CI runs once per
submission, not per commit, so the round is advanced once per submission (``make soak-round``,
part of the stop checklist in docs/contributing.md): any ``SLICES`` consecutive submissions
therefore run every sliced case once, however many commits each one carries.

A case belongs to a slice by its place among the sorted node ids of the run's soak cases
(round-robin): the slices differ by one case at most, and the repetitions of one fault point,
adjacent in that order, fall into different slices. Cases at production scale
(``@pytest.mark.soak_only``) are in no slice: only ``make soak`` runs them.

``JETSPARK_SOAK_SLICE`` overrides the choice: ``I/K`` (slice I of K, from 0), ``all`` (every
soak case, the ``soak_only`` ones too) or ``none`` (no soak case). A run given ``-m`` keeps the
selection its expression makes (``make soak``: ``-m soak``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

ENV = "JETSPARK_SOAK_SLICE"
ROUND_FILE = "tests/soak_round"
# Slices per window: each adds at most ~8 minutes to a run on 2 loaded cores (durations in
# docs/contributing.md, "Soak cases").
SLICES = 14
_NOTE = pytest.StashKey[str]()


@dataclass(frozen=True)
class Choice:
    """What a run takes of the soak cases: ``mode`` is "slice", "all" or "none"."""

    mode: str
    index: int = 0
    slices: int = SLICES
    source: str = ""

    def describe(self) -> str:
        if self.mode != "slice":
            return f"soak cases: {self.mode} ({self.source})"
        return f"soak slice {self.index}/{self.slices} ({self.source})"


def assign(node_ids: Iterable[str], slices: int) -> dict[str, int]:
    """Each node id's slice: round-robin over the sorted ids."""
    return {node_id: n % slices for n, node_id in enumerate(sorted(set(node_ids)))}


def parse(value: str) -> Choice:
    """``JETSPARK_SOAK_SLICE``'s value as a choice; a clear error for anything else."""
    text = value.strip().lower()
    if text in ("all", "none"):
        return Choice(text, source=f"{ENV}={value}")
    index, sep, slices = text.partition("/")
    if sep and index.isdigit() and slices.isdigit() and 0 <= int(index) < int(slices):
        return Choice("slice", int(index), int(slices), f"{ENV}={value}")
    raise pytest.UsageError(
        f"{ENV}={value!r} is not a soak choice: expected I/K with 0 <= I < K (slice I of K), "
        f"'all' or 'none'")


def read_round(root: Path) -> int:
    """The submission round in ``tests/soak_round`` (its first line that is not a comment)."""
    path = root / ROUND_FILE
    for line in path.read_text().splitlines():
        text = line.strip()
        if text and not text.startswith("#"):
            if text.isdigit():
                return int(text)
            break
    raise pytest.UsageError(f"{ROUND_FILE} holds no round number (a line with a whole number): "
                            f"`make soak-round` writes one")


def advance_round(root: Path) -> int:
    """Writes the next round into ``tests/soak_round`` and returns it (``make soak-round``)."""
    path = root / ROUND_FILE
    following = read_round(root) + 1
    kept = [line for line in path.read_text().splitlines() if line.strip().startswith("#")]
    path.write_text("\n".join([*kept, str(following)]) + "\n")
    return following


def choose(root: Path, env: dict[str, str] | None = None) -> Choice:
    """The run's choice: the variable when set, else the submission round's slice."""
    value = (os.environ if env is None else env).get(ENV, "")
    if value.strip():
        return parse(value)
    number = read_round(root)
    return Choice("slice", number % SLICES, SLICES, f"round {number} mod {SLICES}")


def _choice(config: pytest.Config) -> Choice:
    return choose(Path(str(config.rootpath)))


def pytest_report_header(config: pytest.Config) -> str:
    if config.option.markexpr:
        return f"soak cases: as -m {config.option.markexpr!r} selects"
    return f"{_choice(config).describe()}; make soak runs every soak case"


def select(cases: dict[str, bool], choice: Choice) -> set[str]:
    """The soak cases a run takes: ``cases`` maps each soak case's node id to whether it is
    ``soak_only``."""
    if choice.mode == "all":
        return set(cases)
    if choice.mode == "none":
        return set()
    sliced = [node for node, only in cases.items() if not only]
    slices = assign(sliced, choice.slices)
    return {node for node in sliced if slices[node] == choice.index}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without ``-m``: deselects the soak cases outside the run's slice."""
    if config.option.markexpr:
        return
    choice = _choice(config)
    cases = {item.nodeid: bool(item.get_closest_marker("soak_only"))
             for item in items if item.get_closest_marker("soak")}
    keep = select(cases, choice)
    dropped = [item for item in items if item.nodeid in cases and item.nodeid not in keep]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item.nodeid not in cases or item.nodeid in keep]
    config.stash[_NOTE] = (f"{choice.describe()}: {len(keep)} of {len(cases)} soak cases run "
                           f"({sum(cases.values())} soak_only, run by make soak)")


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    note = config.stash.get(_NOTE, None)
    if note:
        terminalreporter.write_sep("-", note)


if __name__ == "__main__":  # make soak-round
    _root = Path(__file__).resolve().parents[1]
    _number = advance_round(_root)
    print(f"{ROUND_FILE}: round {_number}, so the next CI run takes soak slice {_number % SLICES}/{SLICES}")
