"""Per-partition event-time watermarks, coalesced over the non-idle partitions (docs/design.md,
"Watermarks").

Hazelcast Jet's ``EventTimeMapper`` idea, as pure logic with an injected clock, shared by
the sources. For every source partition ``p`` (a Kafka topic-partition, a queue, …):

- ``max_ts[p]``: the greatest event time (epoch ms) of ``p``'s records read so far;
- ``wm[p] = max_ts[p] - lag`` (``lag``: Jet's "maximum tolerable lag");
- ``p`` is *idle* when it has not advanced for ``idle_timeout`` of driver wall clock;
  idle partitions do not hold the watermark back, and rejoin when they advance again;
- the coalesced watermark ``W = max(W_prev, min(wm[p] over non-idle p))`` never decreases.
  A non-idle partition that has not had any record yet holds W back (until it goes idle).
- When every partition is idle, W holds, unless ``advance_when_idle``: then every
  partition's event time is extrapolated with the wall clock since it last advanced
  (``max_ts[p] + now - progress[p]``) and W follows the smallest of those minus ``lag``.

The whole state is a small immutable value (:class:`TrackerState`) that serializes to
JSON, so a source keeps it in its offsets: a replayed batch sees the same watermark, and a
restarted query continues monotone.

A record is *late* when ``ts(r) < W_prev``, ``W_prev`` being the coalesced watermark the
batch started with (Spark's current watermark): :func:`late_mask`. As in Jet, lateness is
judged against the coalesced watermark, not the record's own partition: a record behind its
partition's running maximum but not behind W is on time (the windows it belongs to are still
open). A source flags late records and delivers them; a window stage leaves a late record out
of the windows it has already emitted, and only those.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

Clock = Callable[[], int]
"""Returns the current wall-clock time in epoch milliseconds."""


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class WatermarkPolicy:
    """Configuration of a tracker: how far behind, and when a partition counts as idle."""

    lag_ms: int = 0
    idle_timeout_ms: int = 60_000  # Jet's; the options' default (watermark_options.py) is this one
    """0 disables idleness: every partition holds the watermark back until it has data."""
    advance_when_idle: bool = False

    def __post_init__(self) -> None:
        if self.lag_ms < 0 or self.idle_timeout_ms < 0:
            raise ValueError("lag and idle timeout must be >= 0")


@dataclass(frozen=True)
class PartitionMark:
    """What the tracker knows about one partition."""

    max_ts: int | None
    """Greatest event time (epoch ms) read so far, None before the first record."""
    progress_ms: int
    """Wall clock (epoch ms) when the partition last advanced (or was first seen)."""
    idle: bool = False

    def wm(self, lag_ms: int) -> int | None:
        return None if self.max_ts is None else self.max_ts - lag_ms

    def to_json(self, lag_ms: int) -> dict:
        return {"maxTs": self.max_ts, "wm": self.wm(lag_ms), "idle": self.idle,
                "progressMs": self.progress_ms}

    @classmethod
    def from_json(cls, data: Mapping) -> PartitionMark:
        return cls(data.get("maxTs"), int(data["progressMs"]), bool(data.get("idle", False)))


def partition_key(stream: str, partition: int) -> str:
    """Tracker key of a partition of a stream: ``"orders:3"`` (a Kafka topic-partition), or
    ``"events:0"`` (a queue, one partition). The partition is what follows the last ``:``."""
    return f"{stream}:{partition}"


def split_key(key: str) -> tuple[str, int]:
    stream, _, partition = key.rpartition(":")
    return stream, int(partition)


@dataclass(frozen=True)
class TrackerState:
    """Per-partition marks plus the coalesced watermark W (epoch ms, None before the first)."""

    partitions: Mapping[str, PartitionMark] = field(default_factory=dict)
    watermark: int | None = None

    def wm(self, key: str, lag_ms: int) -> int | None:
        mark = self.partitions.get(key)
        return None if mark is None else mark.wm(lag_ms)

    def to_json(self, lag_ms: int) -> dict:
        """The watermark part of every jetspark source offset (docs/design.md, "Watermarks")::

            {"watermark": W, "partitions": {stream: {partition: {"maxTs", "wm", "idle", "progressMs"}}}}
        """
        nested: dict[str, dict[str, dict]] = {}
        for key, mark in sorted(self.partitions.items(), key=lambda kv: split_key(kv[0])):
            stream, partition = split_key(key)
            nested.setdefault(stream, {})[str(partition)] = mark.to_json(lag_ms)
        return {"watermark": self.watermark, "partitions": nested}

    @classmethod
    def from_json(cls, data: Mapping | None) -> TrackerState:
        """The state :meth:`to_json` wrote (keys ``watermark`` and ``partitions`` of an offset)."""
        data = data or {}
        marks = {partition_key(stream, int(p)): PartitionMark.from_json(m)
                 for stream, parts in (data.get("partitions") or {}).items() for p, m in parts.items()}
        return cls(marks, data.get("watermark"))


@dataclass(frozen=True)
class Progress:
    """One partition's news for a batch: did its end offset advance, and its batch max event time."""

    advanced: bool
    max_ts: int | None = None


def _max(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


class WatermarkTracker:
    """Computes the next :class:`TrackerState` from the previous one and a batch's progress."""

    def __init__(self, policy: WatermarkPolicy, clock: Clock = wall_clock_ms) -> None:
        self.policy = policy
        self.clock = clock

    def initial(self, keys: list[str]) -> TrackerState:
        """State for a fresh query: every partition seen now, no event time yet, no W."""
        now = self.clock()
        return TrackerState({k: PartitionMark(None, now) for k in sorted(keys)}, None)

    def advance(self, state: TrackerState, progress: Mapping[str, Progress]) -> TrackerState:
        """The state after a batch; partitions absent from ``progress`` did not advance.

        Keys unknown to ``state`` are new partitions: first seen now.
        """
        now = self.clock()
        timeout = self.policy.idle_timeout_ms
        marks: dict[str, PartitionMark] = {}
        for key in sorted(set(state.partitions) | set(progress)):
            mark = state.partitions.get(key) or PartitionMark(None, now)
            news = progress.get(key)
            if news is not None:
                mark = PartitionMark(
                    _max(mark.max_ts, news.max_ts), now if news.advanced else mark.progress_ms, mark.idle
                )
            idle = timeout > 0 and now - mark.progress_ms >= timeout
            marks[key] = replace(mark, idle=idle)
        return TrackerState(marks, _max(state.watermark, self._candidate(marks, now)))

    def _candidate(self, marks: Mapping[str, PartitionMark], now: int) -> int | None:
        lag = self.policy.lag_ms
        active = [m for m in marks.values() if not m.idle]
        if active:
            wms = [m.wm(lag) for m in active]
            return None if any(w is None for w in wms) else min(wms)  # type: ignore[type-var]
        if not self.policy.advance_when_idle:
            return None
        extrapolated = [m.max_ts + (now - m.progress_ms) for m in marks.values() if m.max_ts is not None]
        return min(extrapolated) - lag if extrapolated else None


def late_mask(
    ts_ms: np.ndarray, start_max_ts: int | None, w_prev: int | None,
    ignored: np.ndarray | None = None,
) -> tuple[np.ndarray, int | None]:
    """Which records of one partition are late, and the partition's running max after them.

    A record is late when ``ts < w_prev`` (the coalesced watermark the batch started with;
    None: nothing is late yet). ``start_max_ts``: the partition's max event time before these
    records (None: none yet). ``ignored``: records whose event time counts for nothing (beyond
    the batch's cut-off, ``watermark.maxFutureSkew``): they neither move the running max nor
    are late. Vectorized; call it chunk by chunk, feeding the returned running max into the
    next call.
    """
    ts = np.asarray(ts_ms, dtype=np.int64)
    if ts.size == 0:
        return np.zeros(0, dtype=bool), start_max_ts
    skip = ignored is not None and bool(ignored.any())
    late = np.zeros(ts.size, dtype=bool) if w_prev is None else ts < w_prev
    if skip:
        late &= ~ignored
        counted = ts[~ignored]
    else:
        counted = ts
    if counted.size == 0:
        return late, start_max_ts
    top = int(counted.max())
    return late, top if start_max_ts is None else max(int(start_max_ts), top)
