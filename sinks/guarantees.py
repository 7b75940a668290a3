"""The sink words, the same in every sink format: what a sink guarantees and how it commits.

Two options answer two questions (docs/design.md, "Sink protocol"):

* ``guarantee`` — the processing guarantee: ``exactly-once`` (default) or ``at-least-once``.
* ``commit`` — the mechanism that gives it:

  - ``two-phase``: each task prepares its transaction with the batch's marker, the driver
    commits them all (a :class:`~jetspark.sinks.transactional.TransactionalResource` that
    ``supports_remote_commit``);
  - ``task``: each task commits its own transaction together with the marker; a replayed
    partition whose marker is committed is skipped (the same protocol, committed in the task);
  - ``upsert``: rows are upserted by key columns, so a replay rewrites the same rows —
    exactly-once in effect for the target's content;
  - ``none``: plain writes, no marker; a replay writes the batch again — at-least-once.

A third word says what a sink does with a record its target refuses (a row PostgreSQL will not
store, a record Kafka will not take): ``onRejected`` — ``dead-letter`` (the default: the record
goes, with the reason, to the format's dead-letter table or topic, committed with its
micro-batch, and the query goes on) or ``fail`` (the query stops, naming the record).

Each commit gives exactly one guarantee (:data:`GIVES`). A format lists the commits it can
honour in a :class:`SinkCommits`; :func:`parse_guarantee` refuses any other word with an
:class:`~jetspark.errors.OptionError` naming the words the format accepts, and refuses the old
option ``mode`` naming its replacement.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from jetspark.errors import OptionError
from jetspark.options import Options

Guarantee = Literal["exactly-once", "at-least-once"]
Commit = Literal["two-phase", "task", "upsert", "none"]
OnRejected = Literal["dead-letter", "fail"]

EXACTLY_ONCE: Guarantee = "exactly-once"
AT_LEAST_ONCE: Guarantee = "at-least-once"
TWO_PHASE: Commit = "two-phase"
TASK: Commit = "task"
UPSERT: Commit = "upsert"
NONE: Commit = "none"

DEAD_LETTER: OnRejected = "dead-letter"
FAIL: OnRejected = "fail"

GUARANTEES: tuple[Guarantee, ...] = get_args(Guarantee)
COMMITS: tuple[Commit, ...] = get_args(Commit)
#: The guarantee each commit gives: the only pairs of the two options.
GIVES: Mapping[Commit, Guarantee] = {TWO_PHASE: EXACTLY_ONCE, TASK: EXACTLY_ONCE, UPSERT: EXACTLY_ONCE,
                                     NONE: AT_LEAST_ONCE}


@dataclass(frozen=True)
class SinkCommits:
    """The commits one sink format honours, why it refuses the others, and its old ``mode`` words."""

    format: str
    accepted: tuple[Commit, ...]
    """In order of preference: the first one giving a guarantee is that guarantee's default."""
    refused: Mapping[Commit, str] = field(default_factory=dict)
    """Commit → why this format cannot honour it."""
    old_modes: Mapping[str, Commit] = field(default_factory=dict)
    """Words of the removed option ``mode`` → the commit that does the same now."""
    needs: Mapping[Commit, str] = field(default_factory=dict)
    """Commit → what else it needs (shown in the replacement of an old word)."""

    def default(self, guarantee: Guarantee) -> Commit:
        return next(c for c in self.accepted if GIVES[c] == guarantee)

    def pairs(self) -> str:
        """``jetjdbc accepts guarantee=exactly-once with commit=two-phase | task …, or …``."""
        return f"{self.format} accepts " + ", or ".join(
            f"guarantee={g} with commit=" + " | ".join(c for c in self.accepted if GIVES[c] == g)
            for g in GUARANTEES)

    def words(self) -> str:
        return (f"the options are 'guarantee' ({' | '.join(GUARANTEES)}) and 'commit' "
                f"({' | '.join(self.accepted)}); {self.pairs()}")


def parse_guarantee(opts: Options, sink: SinkCommits) -> tuple[Guarantee, Commit]:
    """The ``guarantee`` and ``commit`` options of ``sink``'s format, checked as a pair."""
    mode = opts.get("mode")
    if mode is not None:
        commit = sink.old_modes.get(mode.strip().lower())
        instead = (f"mode={mode.strip()} is now guarantee={GIVES[commit]} with commit={commit}"
                   + (f" ({sink.needs[commit]})" if commit in sink.needs else "") + "; "
                   if commit is not None else "")
        raise OptionError("mode", mode, f"nothing — option 'mode' is gone: {instead}{sink.words()}")
    guarantee = opts.choice("guarantee", EXACTLY_ONCE, GUARANTEES)
    text = opts.string("commit")
    if text is None:
        return guarantee, sink.default(guarantee)
    commit = next((c for c in COMMITS if c == text.strip().lower()), None)
    if commit is None:
        raise OptionError("commit", text, f"{' | '.join(sink.accepted)}; {sink.pairs()}")
    if commit not in sink.accepted:
        why = sink.refused.get(commit, "not implemented")
        raise OptionError("commit", text, f"{' | '.join(sink.accepted)} ({sink.format} cannot do "
                                          f"commit={commit}: {why}); {sink.pairs()}")
    if GIVES[commit] != guarantee:
        fits = " | ".join(c for c in sink.accepted if GIVES[c] == guarantee)
        raise OptionError("commit", text, f"with guarantee={guarantee} only commit={fits} "
                                          f"(commit={commit} gives {GIVES[commit]}); {sink.pairs()}")
    return guarantee, commit


def suffixed(name: str, suffix: str, limit: int) -> str:
    """``<name><suffix>``, the default name of a dead-letter table or topic; when that is
    longer than the target allows (``limit`` bytes), the name is cut and a hash of the whole
    name keeps it apart from other long names (and from ``name`` itself)."""
    whole = f"{name}{suffix}"
    if len(whole.encode()) <= limit:
        return whole
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    stem = name.encode()[:limit - len(suffix.encode()) - len(digest) - 1].decode(errors="ignore")
    return f"{stem}_{digest}{suffix}"


def parse_on_rejected(opts: Options) -> OnRejected:
    """``onRejected``: ``dead-letter`` (default) or ``fail``."""
    return opts.choice("onRejected", DEAD_LETTER, get_args(OnRejected))  # type: ignore[return-value]
