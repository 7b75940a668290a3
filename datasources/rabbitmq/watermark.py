"""The queue's watermark (docs/design.md, "Watermarks") through the shared tracker: the
queue is one partition.

Offset JSON: ``{"watermark": W, "partitions": {"queue": {"maxTs", "wm", "idle", "progressMs"}}}``
(epoch ms). W holds while the queue is idle (or advances with the wall clock when the
shared policy says so); the whole state lives in the offset, so replays see the same W.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from jetspark.datasources.watermarks import (
    Clock,
    PartitionMark,
    Progress,
    TrackerState,
    WatermarkPolicy,
    WatermarkTracker,
    late_mask,
    wall_clock_ms,
)

QUEUE_KEY = "queue"


def state_to_json(state: TrackerState, lag_ms: int) -> dict:
    return {"watermark": state.watermark,
            "partitions": {k: m.to_json(lag_ms) for k, m in state.partitions.items()}}


def state_from_json(data: Mapping | None) -> TrackerState:
    if not data:
        return TrackerState()
    marks = {k: PartitionMark.from_json(v) for k, v in (data.get("partitions") or {}).items()}
    return TrackerState(marks, data.get("watermark"))


class QueueWatermark:
    """Advances the single-partition tracker state stored in the offsets."""

    def __init__(self, lag_ms: int, idle_timeout_ms: int, clock: Clock = wall_clock_ms) -> None:
        self.lag_ms = lag_ms
        self.tracker = WatermarkTracker(WatermarkPolicy(lag_ms, idle_timeout_ms), clock)

    def initial(self) -> dict:
        return state_to_json(self.tracker.initial([QUEUE_KEY]), self.lag_ms)

    def advance(self, data: Mapping | None, event_ms: np.ndarray) -> tuple[dict, np.ndarray]:
        """The offset's watermark state after a batch with these event times, and its late mask."""
        state = state_from_json(data)
        mark = state.partitions.get(QUEUE_KEY)
        late, running = late_mask(event_ms, None if mark is None else mark.max_ts, self.lag_ms,
                                  state.watermark)
        new = self.tracker.advance(state, {QUEUE_KEY: Progress(advanced=len(late) > 0, max_ts=running)})
        return state_to_json(new, self.lag_ms), late
