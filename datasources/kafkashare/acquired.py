"""The records of one micro-batch as they go into Spark's offset log: per topic and partition,
runs of consecutive offsets ``[start, end, deliveryCount]`` (``end`` exclusive), so a batch of
consecutive records takes a few numbers whatever its size (docs/design.md, "Share groups").
Pure logic on numpy arrays; no Kafka client here."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

Runs = dict[str, dict[str, list[list[int]]]]
"""``{topic: {partition: [[start, end, value], ...]}}``, as JSON keeps it."""


def to_runs(offsets: np.ndarray, values: np.ndarray) -> list[list[int]]:
    """Sorted distinct ``offsets`` with one value each → runs ``[start, end, value]`` of
    consecutive offsets sharing a value (vectorized)."""
    if len(offsets) == 0:
        return []
    order = np.argsort(offsets, kind="stable")
    offsets, values = np.asarray(offsets, np.int64)[order], np.asarray(values, np.int64)[order]
    breaks = np.flatnonzero((np.diff(offsets) != 1) | (np.diff(values) != 0)) + 1
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks, [len(offsets)]))
    return [[int(offsets[s]), int(offsets[e - 1]) + 1, int(values[s])]
            for s, e in zip(starts, ends, strict=True)]


def from_runs(runs: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Runs → (sorted offsets, their values)."""
    if not runs:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    arr = np.asarray(runs, np.int64)
    lengths = arr[:, 1] - arr[:, 0]
    starts = np.repeat(arr[:, 0], lengths)
    within = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return starts + within, np.repeat(arr[:, 2], lengths)


def count(runs: Runs) -> int:
    """How many records the runs hold."""
    return sum(end - start for parts in runs.values() for rs in parts.values() for start, end, _ in rs)


@dataclass
class OffsetSet:
    """(topic, partition) → a sorted array of offsets, each with a value (a delivery count or
    the time it was added); membership is asked for a whole array at once."""

    parts: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    @classmethod
    def of(cls, runs: Runs) -> OffsetSet:
        out = cls()
        out.add_runs(runs)
        return out

    def add_runs(self, runs: Mapping[str, Mapping[str, list[list[int]]]]) -> None:
        for topic, parts in runs.items():
            for partition, rs in parts.items():
                self.add(topic, int(partition), *from_runs(rs))

    def add(self, topic: str, partition: int, offsets: np.ndarray, values: np.ndarray) -> None:
        if len(offsets) == 0:
            return
        old_o, old_v = self.parts.get((topic, partition), (np.empty(0, np.int64), np.empty(0, np.int64)))
        o = np.concatenate((old_o, np.asarray(offsets, np.int64)))
        v = np.concatenate((old_v, np.asarray(values, np.int64)))
        o, first = np.unique(o, return_index=True)  # an offset added again keeps its first value
        self.parts[(topic, partition)] = (o, v[first])

    def contains(self, topic: str, partition: int, offsets: np.ndarray) -> np.ndarray:
        """A boolean mask: which of ``offsets`` are in the set."""
        known = self.parts.get((topic, partition))
        if known is None:
            return np.zeros(len(offsets), bool)
        return np.isin(offsets, known[0], assume_unique=False)

    def remove(self, topic: str, partition: int, offsets: np.ndarray) -> None:
        known = self.parts.get((topic, partition))
        if known is None:
            return
        keep = ~np.isin(known[0], offsets)
        if keep.all():
            return
        if keep.any():
            self.parts[(topic, partition)] = (known[0][keep], known[1][keep])
        else:
            del self.parts[(topic, partition)]

    def drop_values_below(self, bound: int) -> None:
        """Forget offsets whose value is below ``bound`` (e.g. added before a time)."""
        for key in list(self.parts):
            o, v = self.parts[key]
            keep = v >= bound
            if keep.all():
                continue
            if keep.any():
                self.parts[key] = (o[keep], v[keep])
            else:
                del self.parts[key]

    def runs(self) -> Runs:
        out: Runs = {}
        for (topic, partition), (o, v) in sorted(self.parts.items()):
            out.setdefault(topic, {})[str(partition)] = to_runs(o, v)
        return out

    def items(self) -> Iterator[tuple[str, int, np.ndarray, np.ndarray]]:
        for (topic, partition), (o, v) in sorted(self.parts.items()):
            yield topic, partition, o, v

    def __len__(self) -> int:
        return sum(len(o) for o, _ in self.parts.values())
