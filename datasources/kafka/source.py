"""``format("jetkafka")``: a replayable Kafka source with per-partition watermarks (docs/design.md,
"Watermarks" and "jetkafka offsets").

Rows: exactly the rows of Spark's Kafka source, on its columns (``key, value, topic,
partition, offset, timestamp, timestampType`` and, with ``includeHeaders``, ``headers``), plus

- ``watermark`` (timestamp): the batch's coalesced watermark W; apply it with
  ``withWatermark("watermark", "0 seconds")`` (or use :func:`read_kafka_stream`);
- ``heartbeat`` (boolean): false on every record. With ``watermark.heartbeats`` (on when the
  query asks for event-time semantics: any ``watermark.*`` option, or
  :func:`read_kafka_stream`) a batch that only moves W (e.g. a partition went idle) has one
  payload-less row with ``heartbeat`` true, and with ``watermark.lateRecords=drop`` late records
  become such stubs (topic, partition, offset, timestamp kept, so they can be counted). Drop
  them after the watermark node: ``where(~col("heartbeat"))`` (jetspark's windowing does);
- ``late`` (boolean): the record's event time is behind the coalesced watermark W the batch
  started with (Spark's current watermark). By default (``watermark.lateRecords=keep``) it is
  delivered, flagged; a window stage leaves it out of the windows it has already emitted.

Progress: each batch's ``latestOffset`` in ``query.lastProgress["sources"][i]`` holds the
log-end offsets and, as Spark's Kafka source reports in its ``metrics``,
``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest`` and ``avgOffsetsBehindLatest`` (PySpark's
Python data source API has no hook for a source's ``metrics``; :mod:`jetspark.listener` reads
them from there).

Per-partition watermarks and idle flags are part of the source offset, so each batch's
``query.lastProgress["sources"][i]["endOffset"]`` shows them (JSON string)::

    end = json.loads(query.lastProgress["sources"][0]["endOffset"])
    end["watermark"]                      # W, epoch ms
    end["partitions"]["orders"]["0"]      # {"maxTs", "wm", "idle", "progressMs"}
    end["offsets"]["orders"]["0"]         # next offset to read

Event time is the Kafka record timestamp. The driver learns each partition's greatest
timestamp below a batch's end offset without reading the batch when it can: Kafka's
ListOffsets(max timestamp) names the partition's record with the greatest timestamp, and
the driver reads that one record to check it is a data record the consumer sees — on
topics written with transactions the answer is often a commit marker, stamped with the
broker's wall clock, or an aborted record, and counting either would make on-time records
late. When the checked record lies below the end offset, its timestamp is the answer (and
when it lies just above because records arrived meanwhile, an unlimited batch is extended
to include it). Otherwise — a marker or aborted record, a batch cut by
``maxOffsetsPerTrigger``, or ``watermark.maxTimestampFrom=scan`` — the driver reads the
range's timestamps itself (a second read of the batch's records, on the driver). The
ListOffsets path covers the whole partition log below the end offset, so records before
``startingOffsets`` count too (they are below the end offset, as docs/design.md, "Watermarks", defines
``maxTs``).

Options (Spark's Kafka source names): ``kafka.*`` (librdkafka settings; the source owns
``enable.auto.commit``, ``auto.offset.reset``, ``enable.partition.eof``),
``subscribe`` | ``subscribePattern`` (a Python regex, searched in the topic name as Spark does) | ``assign``,
``startingOffsets`` (streaming default latest, batch earliest; JSON partitions left out
take the default), ``startingOffsetsByTimestamp`` / ``startingTimestamp`` (+
``startingOffsetsByTimestampStrategy`` error | latest), ``endingOffsets`` /
``endingOffsetsByTimestamp`` / ``endingTimestamp`` (batch only), ``maxOffsetsPerTrigger``,
``minOffsetsPerTrigger`` + ``maxTriggerDelay``, ``failOnDataLoss``, ``includeHeaders``,
``minPartitions``, ``maxRecordsPerPartition``, ``groupIdPrefix``, ``kafkaConsumer.pollTimeoutMs``,
``fetchOffset.numRetries`` / ``fetchOffset.retryIntervalMs``. Ours:
``commitOffsetsToGroup`` (default false),
``watermark.lag`` (default 0), ``watermark.idleTimeout`` (default 60 s; 0 = never idle),
``watermark.lateRecords`` (keep | drop), ``watermark.heartbeats`` (see ``heartbeat`` above),
``watermark.advanceWhenIdle`` (default false: W
holds when every partition is idle; true: it follows the wall clock, in steps of the idle
timeout, never under AvailableNow), ``watermark.maxTimestampFrom`` (auto | scan),
``watermark.maxFutureSkew`` (default off: an event time later than the driver's clock at
planning plus this follows ``eventTime.onMalformed`` instead of moving W; the cut-off is kept
in the offset, ``futureCutoff``, so replays decide the same),
``maxRecordsPerChunk`` (records per Arrow batch, default 20000) and ``eventTime.field`` /
``eventTime.format`` / ``eventTime.onMalformed``: the event time from a field of the
JSON value instead of the record timestamp, in an extra ``eventTime`` column (see
:mod:`jetspark.datasources.kafka.event_time`); the driver then learns ``maxTs`` by reading
each batch's records (a second read, on the driver), since the broker knows only record
timestamps.

Offsets live in Spark's checkpoint (see :mod:`jetspark.datasources.kafka.offsets` for the
JSON); ``commitOffsetsToGroup`` also commits each batch's end offsets to the consumer group
``kafka.group.id`` for Kafka's lag tools, never read back (:mod:`.group_commit`).
``reportLatestOffset`` gives Spark's progress the log-end offsets (``latestOffset``) and the lag
figures. Reads stop by offset, so
transactional topics (offset gaps, aborted records skipped under the default
``read_committed``) and compacted topics work.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from jetspark import faults
from jetspark.datasources.kafka.broker import KafkaBroker
from jetspark.datasources.kafka.consumers import DataLossError
from jetspark.datasources.kafka.group_commit import GroupCommitter
from jetspark.datasources.kafka.offsets import KafkaOffset, TopicPartition, nest, tp_key
from jetspark.datasources.kafka.options import EARLIEST, LATEST, KafkaSourceOptions
from jetspark.datasources.kafka.read import RangeSpec, ReadSettings, read_range
from jetspark.datasources.kafka.scan import scan_max_timestamps
from jetspark.datasources.kafka.schema import (
    heartbeat_batch,
    spark_schema,
    typed_spark_schema,
)
from jetspark.datasources.kafka.typed_values import COLUMNS as TYPED_COLUMNS
from jetspark.datasources.kafka.typed_values import (
    TypedValues,
    check_planned,
    check_replay,
    subscribed_topics,
)
from jetspark.datasources.malformed import future_cutoff
from jetspark.datasources.watermark_options import asks_for_event_time
from jetspark.datasources.watermarks import Clock, Progress, WatermarkTracker, wall_clock_ms
from jetspark.errors import JetsparkError
from jetspark.options import Options

FORMAT = "jetkafka"
#: A micro-batch's ranges share read tasks of up to this many offsets (docs/design.md,
#: "jetkafka offsets"): each task is a Python worker round trip, and a small live batch
#: read by one task ends sooner than one read by a task per Kafka partition.
PACKED_TASK_OFFSETS = 20_000


class KafkaRange(InputPartition):
    """One Spark task: offset ranges of Kafka partitions, read one after the other."""

    def __init__(self, specs: tuple[RangeSpec, ...], first: bool) -> None:
        self.specs = specs
        self.first = first


class Heartbeat(InputPartition):
    """One Spark task yielding the single heartbeat row of a batch that only moves W."""

    def __init__(self, watermark: int | None) -> None:
        self.watermark = watermark


def _settings(options: KafkaSourceOptions) -> ReadSettings:
    return ReadSettings(
        kafka=dict(options.kafka), include_headers=options.include_headers, keep_late=options.keep_late,
        fail_on_data_loss=options.fail_on_data_loss,
        poll_timeout_ms=options.poll_timeout_ms, chunk_rows=options.chunk_rows,
        event_time=options.event_time, on_malformed=options.on_malformed, typed=options.typed,
        marks=options.marks,
    )


def _read(settings: ReadSettings, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not settings.typed:
        yield from _read_rows(settings, partition)
        return
    for batch in _read_rows(settings, partition):
        for typed in settings.typed:
            batch = typed.decode_batch(batch)
        yield batch


def _read_rows(settings: ReadSettings, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if isinstance(partition, Heartbeat):
        yield heartbeat_batch(settings.include_headers, partition.watermark, settings.event_time is not None)
        return
    assert isinstance(partition, KafkaRange)
    *before, last = partition.specs
    produced = 0
    for spec in before:
        for batch in read_range(settings, spec):
            produced += batch.num_rows
            yield batch
    # the last range yields the heartbeat row when the whole task had no row (a batch of gaps only)
    yield from read_range(settings, last, first=partition.first and produced == 0)


def pack_ranges(ranges: list[RangeSpec], budget: int) -> list[tuple[RangeSpec, ...]]:
    """Consecutive ranges grouped into tasks of at most ``budget`` offsets (a larger range
    forms a task alone)."""
    tasks: list[tuple[RangeSpec, ...]] = []
    current: list[RangeSpec] = []
    size = 0
    for r in ranges:
        n = r.end - r.start
        if current and size + n > budget:
            tasks.append(tuple(current))
            current, size = [], 0
        current.append(r)
        size += n
    if current:
        tasks.append(tuple(current))
    return tasks


def split_ranges(ranges: list[RangeSpec], min_partitions: int | None,
                 max_records: int | None = None) -> list[RangeSpec]:
    """Split big ranges, as Spark's Kafka source does: into pieces of at most ``max_records``
    offsets (``maxRecordsPerPartition``), then, while there are fewer than ``min_partitions``
    tasks, in proportion to their size (``minPartitions``).

    Pieces after the first of a range cannot know the running max event time of the
    records before them in the same batch: their late check uses the batch-start wm[p].
    """
    if max_records:
        ranges = [piece for r in ranges for piece in _pieces(r, -(-(r.end - r.start) // max_records))]
    total = sum(r.end - r.start for r in ranges)
    if not min_partitions or len(ranges) >= min_partitions or total == 0:
        return ranges
    # Spark's math.round (half up), on its order of operations
    return [piece for r in ranges
            for piece in _pieces(r, max(1, math.floor((r.end - r.start) / total * min_partitions + 0.5)))]


def _pieces(r: RangeSpec, parts: int) -> list[RangeSpec]:
    """``r`` in ``parts`` pieces as Spark divides one: each the offsets left over the pieces
    left (rounded down, so the last pieces take the remainder), empty pieces left out."""
    pieces, start, left = [], r.start, r.end - r.start
    for part in range(max(1, parts)):
        size = left // (max(1, parts) - part)
        left -= size
        if size:
            pieces.append(replace(r, start=start, end=start + size))
            start += size
    return pieces or [r]


def prorate(available: Mapping[TopicPartition, int], limit: int) -> dict[TopicPartition, int]:
    """Spread ``limit`` offsets over partitions by backlog, like Spark's Kafka source."""
    total = sum(available.values())
    if total <= limit:
        return dict(available)
    out = {}
    for tp, size in available.items():
        share = limit * size / total
        out[tp] = min(size, int(share) if share >= 1 else (1 if size > 0 else 0))
    return out


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver side of ``readStream.format("jetkafka")``: offsets, watermarks, planning."""

    def __init__(self, options: KafkaSourceOptions, clock: Clock = wall_clock_ms) -> None:
        self.options = options
        self.settings = _settings(options)
        self.clock = clock
        self.tracker = WatermarkTracker(options.watermark, clock)
        self._broker: KafkaBroker | None = None
        self._target: dict[TopicPartition, int] | None = None
        self._last_trigger_ms: int | None = None
        self._latest: dict[TopicPartition, int] | None = None
        self._behind: dict[str, float | int] = {}
        self._group: GroupCommitter | None = (
            GroupCommitter(options.kafka) if options.commit_offsets_to_group else None)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_broker"] = None
        state["_group"] = None
        return state

    @property
    def broker(self) -> KafkaBroker:
        if self._broker is None:
            self._broker = KafkaBroker(self.options)
        return self._broker

    # -- offsets ---------------------------------------------------------------------
    def initialOffset(self) -> dict:
        tps = self.broker.topic_partitions()
        start = resolve_offsets(self.broker, self.options, tps, starting=True)
        state = self.tracker.initial([tp_key(tp) for tp in tps])
        return KafkaOffset(start, state, initial=True).to_json(self.options.watermark.lag_ms)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.broker.topic_partitions()
        self._target = self.broker.latest(tps)

    def reportLatestOffset(self) -> dict | None:
        """The log-end offsets seen by the last ``latestOffset`` (``{"offsets": {topic:
        {partition: offset}}}``, the shape of the end offset's ``offsets``), whatever the read
        limit admitted, and how far the batch's end is behind them (Spark's Kafka source's
        ``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest``, ``avgOffsetsBehindLatest``):
        Spark's progress shows it as the source's ``latestOffset``."""
        if self._latest is None:
            return None
        return {"offsets": nest(self._latest), **self._behind}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        faults.point("jetkafka.latest_offset")
        prev = KafkaOffset.from_json(start)
        if self._group is not None and not prev.initial:
            self._group.commit(prev.next)  # Spark asks from a batch's end once it has committed it
        tps = sorted(set(self.broker.topic_partitions()) | set(prev.next))
        if self._target is not None:
            tps = [tp for tp in tps if tp in self._target]
        earliest = self.broker.earliest(tps)
        latest = self.broker.latest(tps)
        self._latest = dict(latest)
        if self._target is not None:
            latest = {tp: min(o, self._target[tp]) for tp, o in latest.items()}
        range_from: dict[TopicPartition, int] = dict(prev.next) if prev.initial else {}
        starts: dict[TopicPartition, int] = {}
        for tp in tps:
            begin = prev.next.get(tp)
            if begin is None:  # discovered while running: read it from the beginning
                begin = range_from[tp] = earliest[tp]
            if begin < earliest[tp] or begin > latest[tp]:
                if self.options.fail_on_data_loss:
                    raise DataLossError(tp[0], tp[1], begin, f"{earliest[tp]} (latest {latest[tp]})",
                                        "COULD_NOT_READ_OFFSET_RANGE" if begin < earliest[tp]
                                        else "PARTITION_OFFSET_CHANGED")
                begin = range_from[tp] = earliest[tp]
            starts[tp] = begin
        available = {tp: max(0, latest[tp] - starts[tp]) for tp in tps}
        admitted = self._admit(available, limit)
        if admitted is None:
            return start
        end = {tp: starts[tp] + admitted.get(tp, 0) for tp in tps}
        self._behind = offsets_behind_latest(end, self._latest)
        cutoff = future_cutoff(self.clock(), self.options.max_future_skew_ms)
        batch_max = self._batch_max_ts(starts, end, latest, cutoff, may_extend=(
            self._target is None and not isinstance(limit, ReadMaxRows)))
        progress = {tp_key(tp): Progress(end[tp] > starts[tp], batch_max.get(tp)) for tp in tps}
        state = self.tracker.advance(prev.tracker, progress)
        moved = any(end[tp] > starts[tp] for tp in tps)
        if not moved and (state.watermark == prev.tracker.watermark or not self.options.heartbeats):
            return start  # without heartbeats no row could carry a W that moved alone
        if not moved and self._processing_time_step(prev, state):
            return start
        self._last_trigger_ms = self.clock()
        packing = None if self.options.min_partitions else (
            self.options.max_records_per_partition or PACKED_TASK_OFFSETS)
        offset = KafkaOffset(end, state, range_from, future_cutoff=cutoff, task_offsets=packing,
                             readers={t.column: t.reader for t in self.options.typed} or None)
        return offset.to_json(self.options.watermark.lag_ms)

    def _processing_time_step(self, prev: KafkaOffset, state) -> bool:
        """True to hold back a W that only moved with processing time (every partition idle):
        never under AvailableNow (it must come to an end), else in steps of the idle timeout."""
        policy = self.options.watermark
        if not policy.advance_when_idle or not all(m.idle for m in state.partitions.values()):
            return False
        if self._target is not None:
            return True
        before = prev.tracker.watermark
        return before is not None and state.watermark - before < policy.idle_timeout_ms

    def _admit(self, available: dict[TopicPartition, int], limit: ReadLimit) -> dict | None:
        """Offsets admitted per partition under ``limit``; None: wait for more (min rows)."""
        total = sum(available.values())
        min_rows = None
        if isinstance(limit, ReadMinRows):
            min_rows = limit.min_rows
        elif isinstance(limit, ReadMaxRows):
            min_rows = self.options.min_offsets_per_trigger
        if min_rows is not None and self._target is None and 0 < total < min_rows:
            now = self.clock()
            if self._last_trigger_ms is None:
                self._last_trigger_ms = now
            if now - self._last_trigger_ms < self.options.max_trigger_delay_ms:
                return None
        if isinstance(limit, ReadMaxRows):
            return prorate(available, limit.max_rows)
        return available

    def _batch_max_ts(self, starts: Mapping[TopicPartition, int], end: dict[TopicPartition, int],
                      latest: Mapping[TopicPartition, int], cutoff: int | None, *,
                      may_extend: bool) -> dict[TopicPartition, int]:
        """Greatest record timestamp below ``end`` of every partition that moves (exact), leaving
        out event times later than ``cutoff`` (``watermark.maxFutureSkew``; None: no cut-off).

        Kafka's ListOffsets(max timestamp) names the record with the greatest timestamp of
        the partition: when it lies below ``end``, its timestamp is the answer without
        reading data. When it lies above (records arrived since ``latest`` was listed) and
        the batch may take more, ``end`` moves to just after it. Otherwise — or when that
        timestamp is beyond the cut-off — the driver reads the range's timestamps
        (``scan_max_timestamps``), which leaves such records out (or fails on them, as
        ``eventTime.onMalformed`` says).
        """
        need = {tp: (starts[tp], end[tp]) for tp in end if end[tp] > starts[tp]}
        out: dict[TopicPartition, int] = {}
        if self.options.max_ts_from_broker and need:
            answers = self._data_max_timestamps(list(need))
            extend = []
            for tp, (offset, ts) in answers.items():
                if offset < 0 or ts < 0 or (cutoff is not None and ts > cutoff):
                    continue
                if offset < end[tp]:
                    out[tp] = ts
                    del need[tp]
                elif may_extend and end[tp] == latest[tp]:
                    extend.append(tp)
            if extend:
                visible = self.broker.latest(extend)  # above the last stable offset: not yet readable
                for tp in extend:
                    offset, ts = answers[tp]
                    if offset < visible[tp]:
                        end[tp] = offset + 1
                        out[tp] = ts
                        del need[tp]
        if need:
            scanned = scan_max_timestamps(
                self.options.kafka, need, fail_on_data_loss=self.options.fail_on_data_loss,
                poll_timeout_ms=self.options.poll_timeout_ms, event_time=self.options.event_time,
                cutoff_ms=cutoff, on_malformed=self.options.on_malformed,
            )
            out.update({tp: ts for tp, ts in scanned.items() if ts is not None})
        return out

    def _data_max_timestamps(self, tps: list[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        """ListOffsets(max timestamp) answers that name a data record; the others are left
        out (they go to the scan). Transaction commit markers carry the broker's wall-clock
        time and aborted records are invisible under read_committed: counting either would
        move ``maxTs`` past the records the batch really holds."""
        answers = {tp: a for tp, a in self.broker.max_timestamp(tps).items() if a[0] >= 0 and a[1] >= 0}
        seen = self.broker.data_record_timestamps({tp: offset for tp, (offset, _) in answers.items()})
        return {tp: (offset, ts) for tp, (offset, ts) in answers.items() if seen[tp] == ts}

    # -- planning and reading --------------------------------------------------------
    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        faults.point("jetkafka.partitions")
        prev = KafkaOffset.from_json(start)
        cur = KafkaOffset.from_json(end)
        check_replay(self.options.typed, cur.readers, json.dumps(end.get("offsets")))
        ranges = []
        for tp in cur.partitions():
            begin = cur.start_of(tp, prev)
            if begin is None or cur.next[tp] <= begin:
                continue
            ranges.append(RangeSpec(tp[0], tp[1], begin, cur.next[tp], _max_ts(prev, tp),
                                    prev.tracker.watermark, cur.tracker.watermark,
                                    future_cutoff=cur.future_cutoff))
        ranges = split_ranges(ranges, self.options.min_partitions, self.options.max_records_per_partition)
        # only with heartbeats does a batch carry a W that moved without records
        moved_w = self.options.heartbeats and cur.tracker.watermark != prev.tracker.watermark
        if not ranges:
            return [Heartbeat(cur.tracker.watermark)] if moved_w else []
        # packed by the budget in the offset, not today's options: a replay plans the same tasks
        tasks = pack_ranges(ranges, cur.task_offsets) if cur.task_offsets else [(r,) for r in ranges]
        return [KafkaRange(t, first=(i == 0 and moved_w)) for i, t in enumerate(tasks)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.settings, partition)

    def commit(self, end: dict) -> None:
        """Offsets live in Spark's checkpoint; with ``commitOffsetsToGroup`` the batch's end
        offsets also go to the consumer group, for lag tools only (never read back)."""
        if self._group is not None:
            self._group.commit(KafkaOffset.from_json(end).next)

    def stop(self) -> None:
        if self._broker is not None:
            self._broker.close()
            self._broker = None
        if self._group is not None:
            self._group.close()


def offsets_behind_latest(end: Mapping[TopicPartition, int],
                          latest: Mapping[TopicPartition, int]) -> dict[str, float | int]:
    """Spark's Kafka source metrics (SPARK-34854): how many offsets each partition's batch end
    is behind its log end, as the minimum, maximum and average over the partitions."""
    behind = [max(0, latest[tp] - offset) for tp, offset in end.items() if tp in latest]
    if not behind:
        return {}
    return {"minOffsetsBehindLatest": min(behind), "maxOffsetsBehindLatest": max(behind),
            "avgOffsetsBehindLatest": sum(behind) / len(behind)}


def _max_ts(offset: KafkaOffset, tp: TopicPartition) -> int | None:
    mark = offset.tracker.partitions.get(tp_key(tp))
    return None if mark is None else mark.max_ts


def resolve_offsets(broker: KafkaBroker, options: KafkaSourceOptions, tps: list[TopicPartition], *,
                    starting: bool) -> dict[TopicPartition, int]:
    """Concrete offsets for ``startingOffsets``/``endingOffsets`` (and their by-timestamp forms)."""
    spec = options.starting if starting else options.ending
    name = "startingOffsets" if starting else "endingOffsets"
    earliest = broker.earliest(tps)
    latest = broker.latest(tps)
    wanted: dict[TopicPartition, int] = {}
    if spec.by_timestamp:
        stamps = {tp: spec.timestamp if spec.timestamp is not None else spec.per_partition.get(tp)
                  for tp in tps}
        found = broker.for_timestamps({tp: ts for tp, ts in stamps.items() if ts is not None})
        for tp in tps:
            if tp not in found:
                wanted[tp] = spec.default
            elif found[tp] >= 0:
                wanted[tp] = found[tp]
            elif starting and options.timestamp_strategy == "error":
                raise JetsparkError(
                    f"startingOffsetsByTimestamp: no record in topic {tp[0]!r} partition {tp[1]} has a "
                    f"timestamp >= {stamps[tp]}; set startingOffsetsByTimestampStrategy=latest to start "
                    "at the end instead"
                )
            else:
                wanted[tp] = LATEST
    else:
        unknown = set(spec.per_partition) - set(tps)
        if unknown and options.subscription.kind != "subscribePattern":
            raise JetsparkError(f"{name} names partitions that do not exist: {sorted(unknown)}")
        wanted = {tp: spec.per_partition.get(tp, spec.default) for tp in tps}
    out = {}
    for tp, offset in wanted.items():
        if offset == EARLIEST:
            out[tp] = earliest[tp]
        elif offset == LATEST:
            out[tp] = latest[tp]
        else:
            out[tp] = offset
    return out


class KafkaBatchReader(DataSourceReader):
    """``spark.read.format("jetkafka")``: the records between starting and ending offsets."""

    def __init__(self, options: KafkaSourceOptions) -> None:
        self.options = options
        self.settings = _settings(options)

    def partitions(self) -> Sequence[InputPartition]:
        broker = KafkaBroker(self.options)
        try:
            tps = broker.topic_partitions()
            start = resolve_offsets(broker, self.options, tps, starting=True)
            end = resolve_offsets(broker, self.options, tps, starting=False)
            latest = broker.latest(tps)
        finally:
            broker.close()
        ranges = []
        for tp in tps:
            if end[tp] > latest[tp]:
                raise JetsparkError(
                    f"endingOffsets {end[tp]} is after the latest offset {latest[tp]} of topic {tp[0]!r} "
                    f"partition {tp[1]}"
                )
            if end[tp] < start[tp]:
                raise JetsparkError(
                    f"endingOffsets {end[tp]} is before startingOffsets {start[tp]} for topic {tp[0]!r} "
                    f"partition {tp[1]}"
                )
            if end[tp] > start[tp]:
                ranges.append(RangeSpec(tp[0], tp[1], start[tp], end[tp], None, None, None,
                                        detect_late=False))
        return [KafkaRange((r,), first=False) for r in split_ranges(ranges, self.options.min_partitions,
                                                                 self.options.max_records_per_partition)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if type(partition) is InputPartition:  # Spark's stand-in when partitions() is empty
            return iter(())
        return _read(self.settings, partition)


class KafkaDataSource(DataSource):
    """The reading half of the ``jetkafka`` format. To register the format yourself, register
    ``pyspark_jetkafka.DefaultSource`` (source and sink): this class under the name
    ``jetkafka`` would leave the session without jetkafka's writer."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str | T.StructType:
        opts = Options(self.options)
        typed = [TypedValues.parse(opts, subscribed_topics(opts), column) for column in TYPED_COLUMNS
                 if opts.string(f"{column}.format", "bytes") != "bytes"]  # the reader schemas decide
        typed = [t for t in typed if t is not None]
        headers = opts.boolean("includeHeaders", False)
        event_time = opts.string("eventTime.field") is not None
        marks = asks_for_event_time(opts)
        if typed:
            return typed_spark_schema(headers, typed, event_time, marks)
        return spark_schema(headers, event_time, marks)

    def streamReader(self, schema) -> DataSourceStreamReader:
        return KafkaStreamReader(_planned(KafkaSourceOptions.parse(self.options, streaming=True), schema))

    def reader(self, schema) -> DataSourceReader:
        return KafkaBatchReader(_planned(KafkaSourceOptions.parse(self.options, streaming=False), schema))


def _planned(options: KafkaSourceOptions, schema: T.StructType) -> KafkaSourceOptions:
    """``options`` whose typed values have the type the query was planned with."""
    check_planned(options.typed, schema)
    return options
