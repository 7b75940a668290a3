"""jetspark.windowing — Jet-style frame windowing on Spark Structured Streaming.

``window_aggregate(df, key=…, time=…, window=sliding(…) | tumbling(…) | session(…),
aggs={"n": ops.count(), "slope": ops.regr_slope("y", F.col("x") / 1000), …})``; operations
in :mod:`.ops` under Spark's names and argument order, user-defined ones by subclassing
:class:`AggregateOperation` (see :mod:`.aggregate_operation`). Every column argument is a
name or a ``Column`` (:mod:`.inputs`).

In Jet's words: :mod:`.definitions` are the user's windows; :mod:`.policy` is the sliding
window policy (frame arithmetic only); :mod:`.accumulate_by_frame` is stage 1 (events →
per-(key, frame) partials), :mod:`.combine_to_window` stage 2 (frames → windows, by
combine and deduct: :mod:`.sliding_scan`; sessions: :mod:`.sessions`); :mod:`.partials`
holds the partial tables exchanged between them and kept in state (:mod:`.stateful`);
:mod:`.early_results` the period of provisional rows (``early_results``);
:mod:`.kernels` the vectorized accumulator kernels; :mod:`.plan` the compiled query;
:mod:`.partitions` the stateful stage's task count when the session leaves it at Spark's default.
"""

from importlib import import_module as _import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the same names as _LAZY below, for type checkers and IDEs
    from jetspark.windowing import ops
    from jetspark.windowing.aggregate_operation import EVENT_TIME, AggregateError, AggregateOperation, Field
    from jetspark.windowing.api import ENGINES, NULL_TIME_METRIC, STATE_APIS, window_aggregate
    from jetspark.windowing.definitions import (
        SessionWindow,
        SlidingWindow,
        WindowDefinitionError,
        session,
        sliding,
        tumbling,
    )
    from jetspark.windowing.partitions import StatefulPartitionsWarning
    from jetspark.windowing.state_store import ChangelogCheckpointingWarning

_AGGREGATE = "jetspark.windowing.aggregate_operation"
_API = "jetspark.windowing.api"
_DEFINITIONS = "jetspark.windowing.definitions"
#: Public name → the module it is imported from on first use. A Python worker imports the
#: stage it runs (``jetspark.windowing.stateful``, ``.accumulate_by_frame``, ``.ops``), which
#: imports this package first: an eager import here would give each of them the query-building
#: API (``.api``) too.
_LAZY = {
    "ops": "jetspark.windowing.ops",
    "EVENT_TIME": _AGGREGATE, "AggregateError": _AGGREGATE, "AggregateOperation": _AGGREGATE,
    "Field": _AGGREGATE,
    "ENGINES": _API, "NULL_TIME_METRIC": _API, "STATE_APIS": _API, "window_aggregate": _API,
    "SessionWindow": _DEFINITIONS, "SlidingWindow": _DEFINITIONS, "WindowDefinitionError": _DEFINITIONS,
    "session": _DEFINITIONS, "sliding": _DEFINITIONS, "tumbling": _DEFINITIONS,
    "StatefulPartitionsWarning": "jetspark.windowing.partitions",
    "ChangelogCheckpointingWarning": "jetspark.windowing.state_store",
}

__all__ = [
    "ENGINES",
    "EVENT_TIME",
    "NULL_TIME_METRIC",
    "STATE_APIS",
    "AggregateError",
    "AggregateOperation",
    "ChangelogCheckpointingWarning",
    "Field",
    "SessionWindow",
    "SlidingWindow",
    "StatefulPartitionsWarning",
    "WindowDefinitionError",
    "ops",
    "session",
    "sliding",
    "tumbling",
    "window_aggregate",
]


def __getattr__(name: str) -> object:
    """Import a public name of :data:`_LAZY` on first use (then it is a plain attribute)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'jetspark.windowing' has no attribute {name!r}")
    imported = _import_module(module)
    value = imported if module == f"{__name__}.{name}" else getattr(imported, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
