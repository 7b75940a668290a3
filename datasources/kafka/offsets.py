"""The ``jetkafka`` offset as stored in Spark's offset log (and shown in ``query.lastProgress``).

JSON layout (one micro-batch's end offset)::

    {
      "offsets":    {"orders": {"0": 1200, "1": 1187}},        # next record to read
      "from":       {"orders": {"1": 0}},                      # see below (usually absent)
      "watermark":  1700000123000,                             # coalesced W, epoch ms (or null)
      "partitions": {"orders": {"0": {"maxTs": 1700000125000, "wm": 1700000123000,
                                      "idle": false, "progressMs": 1700000200000}, ...}},
      "futureCutoff": 1700003800000,                           # with watermark.maxFutureSkew
      "taskOffsets": 20000,                                    # see below
      "readers":    {"value": {"subject": "orders-value", "version": 3, "id": 7}}  # typed columns
    }

``offsets`` has the shape of Spark's own Kafka source offsets. ``from`` names where this
batch's range of a partition starts when that is not the previous batch's offset: every
partition of the first batch (its start comes from ``startingOffsets``, which may mean
"latest" at the time), and partitions discovered later (earliest). So a batch replayed after
a crash reads exactly the same records. ``watermark`` and ``partitions`` are the watermark
tracker state, in the shape every jetspark source writes
(:meth:`jetspark.datasources.watermarks.TrackerState.to_json`): per-partition max event
time, watermark, idle flag and the driver time it last advanced. ``futureCutoff`` (only with
``watermark.maxFutureSkew``) is the latest event time this batch's records may bring to the
watermark: the driver's clock when it planned the batch plus the skew. Read tasks apply the
cut-off of the offset, never a clock, so a replayed batch decides the same; an offset without
it (written before the option existed, or without it) has no cut-off. ``taskOffsets`` is the
budget by which the batch's ranges were packed into read tasks (absent: a task per range, as
with ``minPartitions`` and in offsets written before packing): a replay plans the same tasks,
so a sink whose tasks are the read tasks sees the same rows in each task. ``readers`` names the
reader schema each typed column (``value.format``, ``key.format``) was planned with — the
registry's subject, version and id, or the SHA-256 of an inline schema, and Protobuf's message —
so a batch replayed by a later run is decoded with the same schema or not at all
(:func:`jetspark.datasources.kafka.typed_values.check_replay`); absent without typed columns and
in offsets written before it existed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from jetspark.datasources.watermarks import TrackerState, partition_key

TopicPartition = tuple[str, int]


def tp_key(tp: TopicPartition) -> str:
    """Tracker key of a topic-partition."""
    return partition_key(*tp)


def nest(values: Mapping[TopicPartition, object]) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for (topic, partition), value in sorted(values.items()):
        out.setdefault(topic, {})[str(partition)] = value
    return out


def _flat(nested: Mapping[str, Mapping[str, object]] | None) -> dict[TopicPartition, object]:
    return {(t, int(p)): v for t, parts in (nested or {}).items() for p, v in parts.items()}


@dataclass(frozen=True)
class KafkaOffset:
    """Next offsets per topic-partition, plus the watermark tracker state."""

    next: Mapping[TopicPartition, int]
    tracker: TrackerState = field(default_factory=TrackerState)
    range_from: Mapping[TopicPartition, int] = field(default_factory=dict)
    initial: bool = False
    """True for ``initialOffset()``: the first batch records where it started in ``from``."""
    future_cutoff: int | None = None
    """Latest event time (epoch ms) the batch's records may bring to the watermark (None: no cut-off)."""
    task_offsets: int | None = None
    """Offsets per packed read task (None: a read task per range)."""
    readers: Mapping[str, Mapping] | None = None
    """The reader schema of each typed column the batch was planned with (None: not recorded)."""

    def start_of(self, tp: TopicPartition, previous: KafkaOffset) -> int | None:
        """Where this batch's range of ``tp`` begins (None: the partition is not read)."""
        if tp in self.range_from:
            return self.range_from[tp]
        return previous.next.get(tp)

    def to_json(self, lag_ms: int) -> dict:
        out: dict = {"offsets": nest(self.next)}
        if self.range_from:
            out["from"] = nest(self.range_from)
        if self.initial:
            out["initial"] = True
        out.update(self.tracker.to_json(lag_ms))
        if self.future_cutoff is not None:
            out["futureCutoff"] = self.future_cutoff
        if self.task_offsets is not None:
            out["taskOffsets"] = self.task_offsets
        if self.readers:
            out["readers"] = {column: dict(reader) for column, reader in sorted(self.readers.items())}
        return out

    @classmethod
    def from_json(cls, data: Mapping) -> KafkaOffset:
        return cls(
            next={tp: int(o) for tp, o in _flat(data.get("offsets")).items()},  # type: ignore[call-overload]
            tracker=TrackerState.from_json(data),
            range_from={tp: int(o) for tp, o in _flat(data.get("from")).items()},  # type: ignore[call-overload]
            initial=bool(data.get("initial", False)),
            future_cutoff=None if data.get("futureCutoff") is None else int(data["futureCutoff"]),
            task_offsets=None if data.get("taskOffsets") is None else int(data["taskOffsets"]),
            readers=data.get("readers"),
        )

    def partitions(self) -> Iterable[TopicPartition]:
        return sorted(self.next)
