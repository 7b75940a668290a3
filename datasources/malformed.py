"""What both sources do with a record whose event time is malformed or too far in the future:
the words of ``eventTime.onMalformed``, the error of ``fail``, and the cut-off of
``watermark.maxFutureSkew`` (docs/design.md, "Watermarks").

A batch's cut-off is the driver's clock when it plans the batch plus the skew; a record whose
event time is later than the cut-off is treated as malformed, so it can never move its
partition's maximum, and with it W, past what the driver's clock allows. The cut-off is
decided once per batch and kept with it (jetkafka: in the offset; jetrabbitmq: the WAL holds
the outcome), so a replayed batch decides the same.
"""

from __future__ import annotations

import numpy as np

from jetspark.errors import JetsparkError

MIN_EVENT_MS = -62_135_596_800_000
"""0001-01-01T00:00:00Z: the earliest event time (Python's and Spark's calendars start there)."""
MAX_EVENT_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z: the latest event time; a later one is malformed."""

#: ``fail`` the read, naming the record; ``null``: the record stays, without that event time.
ON_MALFORMED = ("fail", "null")


class MalformedEventTimeError(JetsparkError):
    """A record's event time is missing, malformed or beyond the cut-off, and
    ``eventTime.onMalformed=fail``."""


def valid_event_ms(ms: np.ndarray) -> np.ndarray:
    """Which event times (epoch ms, float: NaN, ±inf and numbers beyond int64 included) are
    times at all: finite and within years 1-9999. The others are malformed event times."""
    ms = np.asarray(ms, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.isfinite(ms) & (ms >= MIN_EVENT_MS) & (ms <= MAX_EVENT_MS)


def future_cutoff(now_ms: int, max_future_skew_ms: int | None) -> int | None:
    """The latest event time (epoch ms) a batch planned at ``now_ms`` accepts; None: no cut-off."""
    return None if max_future_skew_ms is None else now_ms + max_future_skew_ms


def beyond_cutoff(event_ms: np.ndarray, cutoff_ms: int | None) -> np.ndarray:
    """Which event times (epoch ms) are later than the cut-off (none when there is no cut-off)."""
    ms = np.asarray(event_ms)
    return np.zeros(ms.shape, dtype=bool) if cutoff_ms is None else ms > cutoff_ms


def cutoff_text(cutoff_ms: int | None) -> str:
    """How an error names the cut-off: its value and where it comes from."""
    return (f"later than the batch's cut-off {cutoff_ms} "
            "(epoch ms: the driver's clock + watermark.maxFutureSkew)")
