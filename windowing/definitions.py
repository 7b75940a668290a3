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
            raise WindowDefinitionError(str(e)) from None  # names the window's argument
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
    """Sliding windows ``[start, start + size)``, one starting every ``slide``, aligned to the
    epoch as Spark's ``window(time, size, slide)``.

    Parameters
    ----------
    size : str, int, float or timedelta
        The window's length: ``"30 seconds"``, a number of milliseconds, or a timedelta.
        A whole multiple of ``slide`` (frames are one slide long: Jet's sliding window policy).
    slide : str, int, float or timedelta
        The distance between two windows' starts.

    Returns
    -------
    SlidingWindow

    Raises
    ------
    WindowDefinitionError
        A duration that is not positive or not understood, or a ``size`` that is no multiple
        of ``slide`` (the message proposes sizes and a slide that are).
    """
    return SlidingWindow(duration_us(size, "window size"), duration_us(slide, "window slide"))


def tumbling(size: Duration) -> SlidingWindow:
    """Tumbling windows: back-to-back windows of ``size``, ``sliding(size, size)``, as Spark's
    ``window(time, size)``.

    Parameters
    ----------
    size : str, int, float or timedelta
        The window's length: ``"1 minute"``, a number of milliseconds, or a timedelta.

    Returns
    -------
    SlidingWindow

    Raises
    ------
    WindowDefinitionError
        A duration that is not positive or not understood.
    """
    s = duration_us(size, "window size")
    return SlidingWindow(s, s)


def session(timeout: Duration) -> SessionWindow:
    """Session windows: a key's session closes after ``timeout`` without its events, as
    Spark's ``session_window(time, timeout)``.

    A session is ``[first event, last event + timeout)``: an event that falls inside a
    key's session extends it (the same sessions as Spark's ``session_window``).

    Parameters
    ----------
    timeout : str, int, float or timedelta
        The gap that ends a session: ``"5 minutes"``, a number of milliseconds, or a timedelta.

    Returns
    -------
    SessionWindow

    Raises
    ------
    WindowDefinitionError
        A duration that is not positive or not understood.
    """
    return SessionWindow(duration_us(timeout, "session timeout"))
