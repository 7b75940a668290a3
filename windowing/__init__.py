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
