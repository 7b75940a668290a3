"""The queue's watermark (docs/design.md, "Watermarks") through the shared tracker: the
queue is one partition, ``"<queue>:0"``.

Its part of the offset is the shape every jetspark source writes
(:meth:`jetspark.datasources.watermarks.TrackerState.to_json`)::

    {"watermark": W, "partitions": {"<queue>": {"0": {"maxTs", "wm", "idle", "progressMs"}}}}

(epoch ms). W holds while the queue is idle; the whole state lives in the offset, so
replays see the same W.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from jetspark.datasources.watermarks import (
    Clock,
    Progress,
    TrackerState,
    WatermarkPolicy,
    WatermarkTracker,
    late_mask,
    partition_key,
    wall_clock_ms,
)


def watermark_part(offset: Mapping | None, queue: str) -> dict:
    """A jetrabbitmq offset's ``watermark`` and ``partitions`` in the shape both sources write,
    also from offsets written before they shared one (``"watermark": {"watermark": W,
    "partitions": {"queue": mark}}``, whose one mark becomes ``queue``'s partition 0)."""
    offset = offset or {}
    nested = offset.get("watermark")
    if isinstance(nested, Mapping):
        marks = list((nested.get("partitions") or {}).values())
        return {"watermark": nested.get("watermark"), "partitions": {queue: {"0": marks[0]}} if marks else {}}
    return {"watermark": nested, "partitions": offset.get("partitions") or {}}


def state_of(offset: Mapping | None, queue: str) -> TrackerState:
    """The tracker state in a jetrabbitmq offset (either shape, see :func:`watermark_part`)."""
    return TrackerState.from_json(watermark_part(offset, queue))


class QueueWatermark:
    """Advances the single-partition tracker state stored in the offsets."""

    def __init__(self, queue: str, policy: WatermarkPolicy, clock: Clock = wall_clock_ms) -> None:
        self.key = partition_key(queue, 0)
        self.queue = queue
        self.lag_ms = policy.lag_ms
        self.tracker = WatermarkTracker(policy, clock)

    def initial(self) -> dict:
        """The offset's ``watermark`` and ``partitions`` for a fresh query."""
        return self.tracker.initial([self.key]).to_json(self.lag_ms)

    def advance(self, offset: Mapping | None, event_ms: np.ndarray) -> tuple[dict, np.ndarray]:
        """The offset's ``watermark`` and ``partitions`` after a batch with these event times
        (``offset``: the batch's start offset), and the batch's late mask."""
        state = state_of(offset, self.queue)
        mark = state.partitions.get(self.key)
        late, running = late_mask(event_ms, None if mark is None else mark.max_ts, state.watermark)
        new = self.tracker.advance(state, {self.key: Progress(advanced=len(late) > 0, max_ts=running)})
        return new.to_json(self.lag_ms), late
