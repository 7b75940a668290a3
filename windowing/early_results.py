"""Early results: provisional rows of open windows, at most once per period of processing time.

``window_aggregate(…, early_results="10 seconds")`` (Jet's early results period, Flink's
early-firing trigger). Spark's event-time stateful operator cannot hold processing-time
timers, so a bucket decides on each call — new partials or its event-time timer — whether
its period has elapsed since its last provisional emission; the time of that emission is
kept in the bucket's state blob (:data:`EARLY_KEY`), and "now" is the micro-batch's
processing time as Spark records it in its offset log (the same when a batch is replayed).
What is emitted: docs/design.md, "Early results".
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql.types import BooleanType, StructField, StructType

from jetspark.errors import OptionError
from jetspark.options import parse_duration_ms
from jetspark.windowing.aggregate_operation import AggregateError
from jetspark.windowing.combine_to_window import FINAL
from jetspark.windowing.definitions import Duration, WindowDefinitionError, duration_us

#: Key of the state blob's schema metadata: processing time (ms) of the bucket's last
#: provisional emission.
EARLY_KEY = b"jetspark.early"


def early_results_us(value: Duration | None) -> int | None:
    """The ``early_results`` period in µs (0: every micro-batch), None when not asked for."""
    if value is None:
        return None
    try:
        if isinstance(value, str) and parse_duration_ms(value, option="early_results") == 0:
            return 0
        if isinstance(value, int | float | dt.timedelta) and not isinstance(value, bool) and not value:
            return 0
        return duration_us(value, "early_results")
    except (WindowDefinitionError, OptionError) as e:
        raise AggregateError(
            f"early_results: got {value!r} ({e}); accepted: None (final rows only), or the period of "
            f"provisional rows, a duration >= 0 such as '10 seconds', '500ms' (0: every micro-batch)"
        ) from None


def is_due(period_us: int, last_ms: int | None, now_ms: int) -> bool:
    """Whether a bucket whose last provisional emission was at ``last_ms`` may emit at ``now_ms``."""
    return last_ms is None or (now_ms - last_ms) * 1000 >= period_us


def with_final_column(schema: StructType, names: list[str]) -> StructType:
    """The output schema of early results: ``schema`` and a boolean ``final`` column last;
    refused when a key or aggregate is already called ``final``."""
    if FINAL in names:
        raise AggregateError(
            f"early_results adds a column {FINAL!r} (false on provisional rows, true on the final "
            f"row of a window); a key or aggregate of that name clashes with it: rename it")
    return StructType([*schema.fields, StructField(FINAL, BooleanType(), True)])
