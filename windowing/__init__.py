"""jetspark.windowing — Jet-style frame windowing on Spark Structured Streaming.

``window_aggregate(df, key=…, time=…, window=sliding(…) | tumbling(…) | session(…),
aggs={"n": ops.count(), …})``; operations in :mod:`.ops`, user-defined ones by
subclassing :class:`AggregateOperation` (see :mod:`.aggregate`).
"""

from jetspark.windowing import ops
from jetspark.windowing.aggregate_operation import EVENT_TIME, AggregateError, AggregateOperation, Field
from jetspark.windowing.api import NULL_TIME_METRIC, STATE_APIS, window_aggregate
from jetspark.windowing.definitions import (
    SessionWindow,
    SlidingWindow,
    WindowDefinitionError,
    session,
    sliding,
    tumbling,
)

__all__ = [
    "EVENT_TIME",
    "NULL_TIME_METRIC",
    "STATE_APIS",
    "AggregateError",
    "AggregateOperation",
    "Field",
    "SessionWindow",
    "SlidingWindow",
    "WindowDefinitionError",
    "ops",
    "session",
    "sliding",
    "tumbling",
    "window_aggregate",
]
