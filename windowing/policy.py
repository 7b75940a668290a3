"""Frame arithmetic of sliding windows (Jet's SlidingWindowPolicy), all in microseconds.

Frame ``f`` holds the events with ``f * slide <= t < (f + 1) * slide``. A window is named
by its last frame ``j``: it covers frames ``j - k + 1 … j`` (``k = size / slide``), i.e.
``[(j - k + 1) * slide, (j + 1) * slide)``, exactly Spark's ``window(t, size, slide)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jetspark.windowing.definitions import SlidingWindow


@dataclass(frozen=True)
class SlidingWindowPolicy:
    slide: int
    k: int

    @staticmethod
    def of(window: SlidingWindow) -> SlidingWindowPolicy:
        return SlidingWindowPolicy(window.slide_us, window.frames_per_window)

    def frame_of(self, t_us: np.ndarray) -> np.ndarray:
        return t_us // self.slide  # floor division, also for times before 1970

    def window_start(self, j: np.ndarray) -> np.ndarray:
        return (j - self.k + 1) * self.slide

    def window_end(self, j: np.ndarray) -> np.ndarray:
        return (j + 1) * self.slide

    def first_open_window(self, watermark_us: int | None) -> int | None:
        """Smallest ``j`` whose window end is after the watermark (not yet emitted)."""
        return None if watermark_us is None else watermark_us // self.slide

    def last_closed_window(self, watermark_us: int | None) -> int | None:
        """Greatest ``j`` whose window end is at or before the watermark (emittable)."""
        return None if watermark_us is None else watermark_us // self.slide - 1

    def first_needed_frame(self, watermark_us: int | None) -> int | None:
        """Frames before this one belong only to closed windows and can be evicted."""
        if watermark_us is None:
            return None
        return watermark_us // self.slide - self.k + 1

    def next_window_end(self, frames: np.ndarray, watermark_us: int) -> int | None:
        """End of the earliest still-open window containing one of ``frames``."""
        if len(frames) == 0:
            return None
        j = max(int(frames.min()), watermark_us // self.slide)
        return (j + 1) * self.slide
