"""Window definitions: ``sliding(size, slide)``, ``tumbling(size)``, ``session(timeout)``.

Durations are ``datetime.timedelta``, a number of milliseconds, or a string such as
``"30 seconds"``. Internally everything is in microseconds (Spark's timestamp unit).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

from jetspark.errors import JetsparkError
from jetspark.options import parse_duration_ms


class WindowDefinitionError(JetsparkError, ValueError):
    """A window definition is invalid (non-positive, size not a multiple of slide, …)."""


Duration = str | int | float | dt.timedelta


def duration_us(value: Duration, what: str) -> int:
    """A duration in microseconds; strings as in ``parse_duration_ms``, numbers in ms."""
    if isinstance(value, dt.timedelta):
        us = value // dt.timedelta(microseconds=1)
    elif isinstance(value, bool):
        raise WindowDefinitionError(f"{what}: expected a duration, got {value!r}")
    elif isinstance(value, int | float):
        us = round(value * 1000)
    elif isinstance(value, str):
        try:
            us = parse_duration_ms(value, option=what) * 1000
        except JetsparkError as e:
            raise WindowDefinitionError(str(e)) from None
    else:
        raise WindowDefinitionError(f"{what}: expected a duration, got {value!r}")
    if us <= 0:
        raise WindowDefinitionError(f"{what} must be positive, got {value!r}")
    return us


@dataclass(frozen=True)
class SlidingWindow:
    """Windows ``[start, start + size)`` with ``start`` every ``slide`` (µs)."""

    size_us: int
    slide_us: int

    def __post_init__(self) -> None:
        if self.size_us <= 0 or self.slide_us <= 0:
            raise WindowDefinitionError("window size and slide must be positive")
        if self.size_us % self.slide_us:
            lower = self.size_us // self.slide_us * self.slide_us
            sizes = [_human(n) for n in (lower, lower + self.slide_us) if n > 0]
            raise WindowDefinitionError(
                f"window size {_human(self.size_us)} must be a whole multiple of the slide "
                f"{_human(self.slide_us)}: frames are one slide long (Jet's sliding window policy). "
                f"Use a size of {' or '.join(sizes)}, or a slide of "
                f"{_human(math.gcd(self.size_us, self.slide_us))}"
            )

    @property
    def frames_per_window(self) -> int:
        return self.size_us // self.slide_us


@dataclass(frozen=True)
class SessionWindow:
    """Jet session windows: each event covers ``[t, t + timeout]``; overlapping merge."""

    timeout_us: int

    def __post_init__(self) -> None:
        if self.timeout_us <= 0:
            raise WindowDefinitionError("session timeout must be positive")


WindowDefinition = SlidingWindow | SessionWindow

_UNITS = ((86_400_000_000, "day"), (3_600_000_000, "hour"), (60_000_000, "minute"), (1_000_000, "second"),
          (1_000, "millisecond"), (1, "microsecond"))


def _human(us: int) -> str:
    """A duration in the largest unit that divides it: ``25 seconds``, ``90 minutes``."""
    size, unit = next((size, unit) for size, unit in _UNITS if us % size == 0)
    n = us // size
    return f"{n} {unit}{'s' if n != 1 else ''}"


def sliding(size: Duration, slide: Duration) -> SlidingWindow:
    """Sliding windows of ``size`` every ``slide``; ``size`` must be a multiple of ``slide``."""
    return SlidingWindow(duration_us(size, "window size"), duration_us(slide, "window slide"))


def tumbling(size: Duration) -> SlidingWindow:
    """Tumbling windows: ``sliding(size, size)``."""
    s = duration_us(size, "window size")
    return SlidingWindow(s, s)


def session(timeout: Duration) -> SessionWindow:
    """Session windows closing after ``timeout`` without events for the key."""
    return SessionWindow(duration_us(timeout, "session timeout"))
