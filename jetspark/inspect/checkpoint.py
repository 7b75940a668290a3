"""``jetspark inspect``: a streaming query's checkpoint read into a typed model (read-only).

Spark's checkpoint of a micro-batch query holds

- ``metadata``: ``{"id": "<query id>"}`` (stable across restarts; jetjdbc's default sink id);
- ``offsets/<batchId>``: a version line (``v1``), a metadata JSON line (``batchWatermarkMs``:
  Spark's event-time watermark in effect for the batch, ``batchTimestampMs``, ``conf``), then
  one line per source with the source's end offset for the batch (``-`` when it has none);
- ``commits/<batchId>``: a version line and ``{"nextBatchWatermarkMs": …}``, written once the
  batch's sink committed;
- ``sources/``, ``state/``: sources' own files and state stores (not read here).

A batch in ``offsets/`` without a ``commits/`` entry was planned but not committed: a restart
runs it again with the same offsets. Spark keeps the last ``minBatchesToRetain`` (100)
entries of both logs.

Source offsets are recognized by their JSON shape: jetkafka's
(:mod:`jetspark.datasources.kafka.offsets`: ``offsets``, ``watermark``, ``partitions``) and
jetrabbitmq's (:mod:`jetspark.datasources.rabbitmq.driver`: ``seq``, ``epoch``, ``watermark``
state, running ``counts``); any other source is kept as raw JSON. Live numbers from the
services (Kafka lag, queue depth, prepared transactions) are in :mod:`jetspark.inspect.services`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from jetspark.datasources.rabbitmq.watermark import watermark_part
from jetspark.errors import JetsparkError
from jetspark.inspect.storage import Folder, open_folder

JETKAFKA, JETRABBITMQ, OTHER = "jetkafka", "jetrabbitmq", "other"


class CheckpointError(JetsparkError):
    """The folder is not a streaming checkpoint, or a log entry cannot be read."""


@dataclass(frozen=True)
class PartitionState:
    """One source partition's watermark state in a batch's end offset (epoch ms)."""

    label: str
    """``"<partition>"`` (one topic), ``"<topic>:<partition>"`` (several) or a queue's name."""
    topic: str | None
    partition: int | None
    max_ts: int | None
    wm: int | None
    idle: bool
    progress_ms: int | None
    next_offset: int | None = None
    """jetkafka: the next offset to read after the batch."""


@dataclass(frozen=True)
class SourceOffset:
    """One source's end offset of a batch."""

    index: int
    kind: str
    """``jetkafka``, ``jetrabbitmq`` or ``other``."""
    watermark: int | None
    """The source's coalesced watermark W after the batch (epoch ms)."""
    partitions: tuple[PartitionState, ...] = ()
    seq: int | None = None
    """jetrabbitmq: the next WAL sequence number (messages taken so far)."""
    epoch: int | None = None
    """jetrabbitmq: the lease epoch of the batch's writer."""
    counts: Mapping[str, int] = field(default_factory=dict)
    """jetrabbitmq: running totals (``late``, ``duplicates``, ``missingIdDropped``, …)."""
    raw: object = None
    """The offset JSON as logged."""


@dataclass(frozen=True)
class BatchInfo:
    """One micro-batch of the offset log."""

    batch_id: int
    committed: bool
    spark_watermark_ms: int | None
    """Spark's event-time watermark in effect for the batch (``batchWatermarkMs``; 0, Spark's
    "none yet", reads as None)."""
    timestamp_ms: int | None
    """When Spark planned the batch (``batchTimestampMs``)."""
    sources: tuple[SourceOffset, ...]
    late: int | None = None
    """Late records of the batch where the offsets record them (jetrabbitmq), else None."""

    @property
    def partitions(self) -> dict[str, PartitionState]:
        return partitions_of(self.sources)

    @property
    def watermark(self) -> int | None:
        """W after the batch: the least of the jetspark sources' watermarks."""
        marks = [s.watermark for s in self.sources if s.kind != OTHER and s.watermark is not None]
        return min(marks) if marks else None


@dataclass(frozen=True)
class Checkpoint:
    """What a checkpoint tells about its query, batches oldest first."""

    path: str
    query_id: str | None
    batches: tuple[BatchInfo, ...]
    first_logged: int | None
    """The oldest batch id still in the offset log (older entries were purged by Spark)."""

    @property
    def last(self) -> BatchInfo | None:
        return self.batches[-1] if self.batches else None

    @property
    def last_committed(self) -> int | None:
        done = [b.batch_id for b in self.batches if b.committed]
        return max(done) if done else None

    @property
    def replay_batch(self) -> int | None:
        """The batch planned but not committed, which a restart runs again (None: none)."""
        last = self.last
        return last.batch_id if last is not None and not last.committed else None


# -- source offsets -------------------------------------------------------------------------
def _int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def _mark(label: str, topic: str | None, partition: int | None, data: Mapping,
          next_offset: int | None = None) -> PartitionState:
    return PartitionState(label, topic, partition, _int(data.get("maxTs")), _int(data.get("wm")),
                          bool(data.get("idle", False)), _int(data.get("progressMs")), next_offset)


def parse_source_offset(index: int, data: object) -> SourceOffset:
    """A source's offset (a JSON string or the parsed value) as a :class:`SourceOffset`."""
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError:
            return SourceOffset(index, OTHER, None, raw=data)
    if not isinstance(data, Mapping):
        return SourceOffset(index, OTHER, None, raw=data)
    if "offsets" in data and "partitions" in data:
        offsets = data.get("offsets") or {}
        marks = data.get("partitions") or {}
        topics = sorted(set(offsets) | set(marks))
        parts = []
        for topic in topics:
            numbers = sorted({int(p) for p in (offsets.get(topic) or {})}
                             | {int(p) for p in (marks.get(topic) or {})})
            for p in numbers:
                label = str(p) if len(topics) == 1 else f"{topic}:{p}"
                nxt = (offsets.get(topic) or {}).get(str(p))
                parts.append(_mark(label, topic, p, (marks.get(topic) or {}).get(str(p)) or {}, _int(nxt)))
        return SourceOffset(index, JETKAFKA, _int(data.get("watermark")), tuple(parts), raw=data)
    if "seq" in data:
        part = watermark_part(data, "queue")  # an offset of the older shape names no queue
        queues = sorted(part["partitions"].items())
        parts = tuple(_mark(queue, queue, int(p), v)
                      for queue, marks in queues for p, v in sorted(marks.items()))
        watermark = part["watermark"]
        counts = {k: int(v) for k, v in (data.get("counts") or {}).items()}
        return SourceOffset(index, JETRABBITMQ, _int(watermark), parts, seq=_int(data["seq"]),
                            epoch=_int(data.get("epoch")), counts=counts, raw=data)
    return SourceOffset(index, OTHER, None, raw=data)


# -- the logs -------------------------------------------------------------------------------
def _batch_ids(folder: Folder, log: str) -> list[int]:
    """Batch ids with an entry in a log folder (temporary and checksum files skipped)."""
    return sorted(int(n) for n in folder.names(log) if n.isdigit())


def parse_offset_entry(text: str, where: str = "offsets") -> tuple[dict, list[object]]:
    """An ``offsets/<batchId>`` file: (its metadata, each source's offset JSON or None)."""
    lines = text.split("\n")
    if not re.fullmatch(r"v\d+", lines[0].strip()):
        raise CheckpointError(f"{where}: not a Spark offset log entry (no version line such as 'v1')")
    try:
        meta = json.loads(lines[1]) if len(lines) > 1 and lines[1].strip() else {}
        sources = [None if line.strip() == "-" else json.loads(line) for line in lines[2:] if line.strip()]
    except ValueError as e:
        raise CheckpointError(f"{where}: a line is not JSON ({e})") from None
    if not isinstance(meta, Mapping):
        raise CheckpointError(f"{where}: the batch metadata (line 2) is not a JSON object")
    return dict(meta), sources


def _read_text(folder: Folder, *parts: str) -> str | None:
    """A checkpoint file's text; None when it does not exist (purged by Spark meanwhile)."""
    data = folder.read_bytes(*parts)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise CheckpointError(f"{folder.where(*parts)}: not a text file: not written by Spark") from None


def _query_id(folder: Folder) -> str | None:
    """The ``id`` of the checkpoint's ``metadata`` file (None when the file is missing)."""
    text = _read_text(folder, "metadata")
    if text is None:
        return None
    try:
        data = json.loads(text.split("\n", 1)[0])
    except ValueError:
        data = None
    if not isinstance(data, Mapping) or not isinstance(data.get("id"), str):
        raise CheckpointError(f'{folder.where("metadata")}: not a Spark checkpoint metadata file '
                              '(expected {"id": "<query id>"})')
    return data["id"]


def read_checkpoint(path: str, last: int | None = None) -> Checkpoint:
    """Read the checkpoint at ``path`` (a local folder or a filesystem URI: ``s3://``/``s3a://``,
    ``gs://``, ``hdfs://``, ``abfs://``, ``file://``); ``last``: only the newest that many batches.

    Raises :class:`CheckpointError`, naming the file, when ``path`` has no offset log or a file
    in it is not what Spark writes (a corrupt or foreign checkpoint).
    """
    folder = open_folder(path, "checkpointLocation", CheckpointError)
    if folder.kind("offsets") != "dir":
        raise CheckpointError(
            f"{folder.shown}: no offsets/ folder: not a streaming checkpoint, or no batch planned yet")
    query_id = _query_id(folder)
    ids = _batch_ids(folder, "offsets")
    committed = set(_batch_ids(folder, "commits"))
    first = ids[0] if ids else None
    # one batch more than shown, for per-batch differences of running counts
    chosen = ids if last is None or last <= 0 else ids[-(last + 1):]
    batches: list[BatchInfo] = []
    prev: BatchInfo | None = None
    for batch_id in chosen:
        text = _read_text(folder, "offsets", str(batch_id))
        if text is None:  # purged by Spark meanwhile
            continue
        entry = folder.where("offsets", str(batch_id))
        meta, raw = parse_offset_entry(text, entry)
        try:
            sources = tuple(parse_source_offset(i, s) for i, s in enumerate(raw))
            b = BatchInfo(batch_id, batch_id in committed, _int(meta.get("batchWatermarkMs")) or None,
                          _int(meta.get("batchTimestampMs")), sources, _late(batch_id, sources, prev))
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise CheckpointError(f"{entry}: a source offset or the batch metadata has an unexpected "
                                  f"value ({type(e).__name__}: {e})") from None
        batches.append(b)
        prev = b
    if last is not None and last > 0:
        batches = batches[-last:]
    return Checkpoint(folder.shown, query_id, tuple(batches), first)


def _late(batch_id: int, sources: tuple[SourceOffset, ...], prev: BatchInfo | None) -> int | None:
    """Late records of a batch from the running counts in its and the previous batch's offsets
    (batch 0 starts from zero); None when no source records them."""
    total, known = 0, False
    for s in sources:
        if s.kind != JETRABBITMQ or "late" not in s.counts:
            continue
        if batch_id == 0:
            before: int | None = 0
        elif prev is not None and prev.batch_id == batch_id - 1 and s.index < len(prev.sources):
            before = prev.sources[s.index].counts.get("late")
        else:
            before = None
        if before is not None:
            total += s.counts["late"] - before
            known = True
    return total if known else None


def committed_kafka_offsets(cp: Checkpoint) -> tuple[int | None, list[tuple[str, int, int]]]:
    """The jetkafka partitions' committed end offsets: ``(batch, [(topic, partition, next offset)])``
    of the newest committed batch shown; without one, the first batch's starting offsets
    (``from``, batch None). A partition's lag is the broker's end offset minus this offset:
    what a consumer group committed after each batch would show."""
    done = [b for b in cp.batches if b.committed]
    if done:
        return done[-1].batch_id, [(p.topic, p.partition, p.next_offset) for s in done[-1].sources
                                   if s.kind == JETKAFKA for p in s.partitions
                                   if p.topic is not None and p.partition is not None
                                   and p.next_offset is not None]
    tps: list[tuple[str, int, int]] = []
    for s in cp.batches[0].sources if cp.batches else ():
        start = s.raw.get("from") if s.kind == JETKAFKA and isinstance(s.raw, Mapping) else None
        try:
            for topic, parts in (start or {}).items():
                tps += sorted((topic, int(p), int(o)) for p, o in parts.items())
        except (ValueError, TypeError, AttributeError):
            raise CheckpointError(f"{cp.path}: batch {cp.batches[0].batch_id}'s jetkafka starting "
                                  "offsets ('from') are not partition numbers and offsets") from None
    return None, tps


# -- formatting -----------------------------------------------------------------------------
def iso(ms: int | None) -> str:
    """Epoch ms as ``2026-01-01 12:00:05.250`` (UTC); ``-`` for None."""
    if ms is None:
        return "-"
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    except (OverflowError, ValueError, OSError):  # beyond datetime's years 1..9999
        return f"{ms} ms"


def seconds(ms: int | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.1f} s"


def partitions_of(sources: tuple[SourceOffset, ...]) -> dict[str, PartitionState]:
    """The jetspark sources' partitions by label (``<source>/<label>`` when several sources)."""
    jet = [s for s in sources if s.kind != OTHER]
    return {(p.label if len(jet) == 1 else f"{s.index}/{p.label}"): p for s in jet for p in s.partitions}


def slowest_of(partitions: Mapping[str, PartitionState]) -> tuple[str, int] | None:
    """The non-idle partition with the least wm (the one holding W back) and how far, in ms,
    its wm is behind the leading non-idle partition's; None without such a partition."""
    live = {k: p.wm for k, p in partitions.items() if not p.idle and p.wm is not None}
    if not live:
        return None
    label = min(live, key=lambda k: (live[k], k))
    return label, max(live.values()) - live[label]  # type: ignore[operator]

