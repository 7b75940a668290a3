"""The acknowledging-queue protocol of ``jetrabbitmq`` on the driver (docs/design.md,
"Queue source protocol").

Offsets are ``{"seq": next WAL sequence number, "epoch": lease epoch of the batch's writer,
"watermark": W, "partitions": {...}, "counts": {...}}`` (the watermark part in the shape of
every jetspark source: :mod:`.watermark`).

* The driver takes the lease on ``walLocation`` (:mod:`.lease`) before it opens the
  consumer, so a second driver on the same checkpoint stops before it consumes; every WAL
  write, dedup write and ack is preceded by a fencing check of that lease.
* ``latest_offset(start)``: everything below ``start`` is committed by Spark (it asks for
  the next batch only after the previous one's commit-log entry), so first commit through
  ``start``; drop WAL files at or beyond ``start`` (written before a crash but never in
  Spark's offset log — their deliveries are redelivered); then take deliveries, drop the
  duplicates (IDs in the dedup store or twice in the batch: acked at once), write the
  batch to the WAL durably and only then return the new offset.
* ``commit_through(seq)``: the IDs read back from the WAL files below ``seq`` (the files
  Spark processed, never an in-memory list) go to the dedup store, THEN the deliveries
  holding exactly those IDs are acked (current channel only), THEN the WAL files are deleted.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np

from jetspark import faults
from jetspark.datasources.malformed import MalformedEventTimeError, cutoff_text, future_cutoff
from jetspark.datasources.rabbitmq.consumer import Delivery, QueueConsumer
from jetspark.datasources.rabbitmq.dedup import DedupStore
from jetspark.datasources.rabbitmq.lease import Lease
from jetspark.datasources.rabbitmq.options import RabbitMQOptions
from jetspark.datasources.rabbitmq.records import (
    EventTimes,
    body_hash,
    event_times_ms,
    message_ids,
    to_wal_table,
)
from jetspark.datasources.rabbitmq.wal import WalRange, WriteAheadLog
from jetspark.datasources.rabbitmq.watermark import QueueWatermark
from jetspark.errors import JetsparkError

log = logging.getLogger(__name__)

AVAILABLE_NOW_PATIENCE_S = 10.0
DUE_PATIENCE_S = 2.0
"""How long a trigger waits for deliveries the queue holds ready before it says "no data"."""
COUNT_KEYS = ("late", "duplicates", "missingIdDropped", "missingIdHashed", "malformedEventTime",
              "malformedHeaders", "oversizeRejected")


class MissingMessageIdError(JetsparkError):
    """A message has no ID and ``onMissingMessageId`` is ``fail``."""


class WalGapError(JetsparkError):
    """Spark asks for a batch whose WAL files are gone."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class PendingBatch:
    ids: list[str]
    deliveries: list[Delivery]


@dataclass
class QueueDriver:
    """Driver-side state of one running query: consumer, WAL, dedup store."""

    options: RabbitMQOptions
    clock: object = _now_ms
    wal: WriteAheadLog = field(init=False)
    consumer: QueueConsumer = field(init=False)

    def __post_init__(self) -> None:
        o = self.options
        self.lease = Lease(o.wal_location, o.lease_timeout_ms, clock=self.clock)
        self.lease.acquire()  # before the consumer exists: a second driver consumes nothing
        self.wal = WriteAheadLog(o.wal_location)
        self.consumer = QueueConsumer(
            o.connect_to, o.queue, o.prefetch, reconnect_timeout_s=o.reconnect_timeout_ms / 1000,
            display_url=o.redacted_url(), buffer_bytes=o.buffer_memory_bytes,
            max_body_bytes=o.max_message_bytes,
        )
        self._dedup: DedupStore | None = None
        self._ranges: list[WalRange] | None = None
        self._pending: dict[WalRange, PendingBatch] = {}
        self._logged: dict[tuple[int, int], int] = {}  # WAL range -> epoch an offset named
        self._counts = dict.fromkeys(COUNT_KEYS, 0)
        self._budget: int | None = None  # deliveries left under Trigger.AvailableNow
        self.watermarks = QueueWatermark(o.queue, o.watermark.policy, self.clock)

    # -- state ----------------------------------------------------------------------------
    @property
    def dedup(self) -> DedupStore:
        if self._dedup is None:
            o = self.options
            self._dedup = DedupStore(o.wal_location, o.dedup_retention_ms, self.clock, o.dedup_memory_bytes)
        return self._dedup

    def ranges(self) -> list[WalRange]:
        if self._ranges is None:
            self._ranges = self.wal.ranges()
        return self._ranges

    def initial_offset(self) -> dict:
        return {"seq": 0, "epoch": self.lease.epoch, **self.watermarks.initial(),
                "counts": dict.fromkeys(COUNT_KEYS, 0)}

    # -- Spark calls ------------------------------------------------------------------------
    def prepare_available_now(self) -> None:
        """Fix "now": the deliveries to take are those in the queue at this moment."""
        self._budget = self.consumer.count_ready()

    def latest_offset(self, start: dict, max_rows: int | None) -> dict:
        start_seq = int(start["seq"])
        self.lease.check()  # a driver that lost the lease must not touch its successor's WAL
        self._discard_from(start_seq)
        self.commit_through(start_seq)
        limit = min(max_rows or self.options.batch_limit, self.options.batch_limit)
        self.consumer.ensure_open()
        rows: list[Delivery] = []
        ids: list[str] = []
        seen: set[str] = set()
        poll_s = self.options.poll_timeout_ms / 1000
        max_bytes = self.options.max_bytes_per_trigger
        taken_bytes = 0
        while len(rows) < limit:  # duplicates do not fill a batch: take more
            if max_bytes is not None and taken_bytes >= max_bytes:
                break
            want = limit - len(rows)
            if self._budget is not None:
                want = min(want, self._budget)
                if want <= 0:
                    break
            room = None if max_bytes is None else max_bytes - taken_bytes  # > 0: checked above
            deliveries = self.consumer.fetch(want, poll_s, max_bytes=room, oversize_first=not rows)
            if not deliveries and not rows and self._budget:
                # AvailableNow ends at the first empty batch, yet messages counted at the start
                # are due: wait for them a while (another consumer may have taken them).
                deliveries = self.consumer.fetch(want, poll_s, first_wait_s=AVAILABLE_NOW_PATIENCE_S,
                                                 max_bytes=room, oversize_first=True)
            elif not deliveries and not rows and self._budget is None and self.consumer.deliveries_due():
                # "No data" ends processAllAvailable(): messages the broker holds ready for us
                # (published a moment ago, or just after a connect) are waited for first.
                deliveries = self.consumer.fetch(want, poll_s, first_wait_s=DUE_PATIENCE_S,
                                                 max_bytes=room, oversize_first=True)
            if not deliveries:
                break
            if self._budget is not None:
                self._budget -= len(deliveries)
            taken_bytes += sum(d.size for d in deliveries)
            self.consumer.ack(self._select(self._reject_oversize(deliveries), rows, ids, seen))
        if not rows:
            return start
        now = self.clock()
        cutoff = future_cutoff(now, self.options.watermark.max_future_skew_ms)
        events = event_times_ms(rows, self.options, now, cutoff)
        self._check_malformed(rows, ids, events, cutoff)
        state, late = self.watermarks.advance(start, events.ms)
        self._counts["late"] += int(late.sum())
        r = WalRange(start_seq, start_seq + len(rows), self.lease.epoch)
        self.lease.check()
        null_timestamp = events.future if self.options.event_time_header is None else None
        self.wal.write(r, to_wal_table(rows, ids, events.ms, late, null_timestamp))
        self.ranges().append(r)
        self._logged[(r.start, r.end)] = r.epoch
        self._pending[r] = PendingBatch(ids, rows)
        counts = {k: int(start.get("counts", {}).get(k, 0)) + self._counts[k] for k in COUNT_KEYS}
        self._counts = dict.fromkeys(COUNT_KEYS, 0)
        faults.point("rabbitmq.after_wal_write")
        return {"seq": r.end, "epoch": r.epoch, **state, "counts": counts}

    def commit_through(self, seq: int) -> None:
        """Record IDs below ``seq`` as committed, then ack them, then drop their WAL files."""
        done = [r for r in self.ranges() if r.end <= seq]
        if not done:
            self.consumer.ensure_open()
            return
        ids: list[str] = []
        deliveries: list[Delivery] = []
        for r in self._committed_files(done):
            logged = self.wal.read(r, ["message_id"]).column(0).to_pylist()
            ids.extend(logged)
            pending = self._pending.pop(r, None)
            if pending is not None:  # ours: ack exactly the deliveries whose IDs Spark processed
                in_wal = set(logged)
                pairs = zip(pending.deliveries, pending.ids, strict=True)
                deliveries.extend(d for d, i in pairs if i in in_wal)
            # else written before a restart: its deliveries come back and are deduplicated
        self.lease.check()
        self.dedup.add(ids, end_seq=max(r.end for r in done))
        faults.point("rabbitmq.before_ack")
        self.consumer.ensure_open()
        self.lease.check()
        self.consumer.ack(deliveries)
        self.wal.delete(done)
        self._ranges = [r for r in self.ranges() if r.end > seq]

    def _committed_files(self, done: list[WalRange]) -> list[WalRange]:
        """Of the WAL files below a committed offset, the ones Spark processed: per range the
        file of the epoch its offset named (seen by ``plan`` or written here), or the only
        file. Two files of one range with no known epoch (a second driver wrote one before
        the lease existed) are left out of the dedup store: a redelivery may then repeat,
        never vanish."""
        by_range: dict[tuple[int, int], list[WalRange]] = {}
        for r in done:
            by_range.setdefault((r.start, r.end), []).append(r)
        chosen = []
        for key, files in sorted(by_range.items()):
            epoch = self._logged.pop(key, None)
            pick = [r for r in files if r.epoch == epoch] if epoch is not None else files
            if len(pick) == 1:
                chosen.append(pick[0])
            else:
                log.warning("jetrabbitmq: WAL range %s has files of epochs %s and none is known to be "
                            "Spark's; their IDs are not deduplicated", key, [r.epoch for r in files])
        return chosen

    def plan(self, start: dict, end: dict) -> list[WalRange]:
        """The WAL files making up the batch ``[start, end)``; raises when any is missing."""
        lo, hi = int(start["seq"]), int(end["seq"])
        if lo >= hi:
            return []
        epoch = end.get("epoch")  # the writer Spark's offset log names
        chosen = sorted(r for r in self.wal.ranges()
                        if r.start < hi and r.end > lo and (epoch is None or r.epoch == epoch))
        if epoch is not None:
            self._logged.update(((r.start, r.end), r.epoch) for r in chosen)
        covered = lo
        for r in chosen:
            if r.start > covered:
                break
            covered = max(covered, r.end)
        if covered < hi:
            raise WalGapError(
                f"jetrabbitmq: the write-ahead log under {self.options.shown_wal_location()!r} "
                "(option walLocation) "
                f"lacks sequence numbers [{covered}, {hi}) of the batch [{lo}, {hi}); was walLocation "
                "changed, shared with another query or deleted? Those messages cannot be replayed."
            )
        return chosen

    def stop(self) -> None:
        try:
            self.consumer.close()
        finally:
            self.lease.release()

    # -- internals ------------------------------------------------------------------------
    def _discard_from(self, seq: int) -> None:
        """Drop WAL batches at or beyond ``seq``: Spark never logged them as offsets."""
        orphans = [r for r in self.ranges() if r.start >= seq]
        if not orphans:
            return
        for r in sorted(orphans, reverse=True):
            pending = self._pending.pop(r, None)
            if pending is not None:
                self.consumer.unfetch(pending.deliveries)
        self.wal.delete(orphans)
        self._ranges = [r for r in self.ranges() if r.start < seq]

    def _check_malformed(self, rows: list[Delivery], ids: list[str], events: EventTimes,
                         cutoff: int | None) -> None:
        """Count the batch's malformed (or too-future) event times and undecoded header tables,
        or fail (``eventTime.onMalformed=fail``) naming the first message; nothing is written then."""
        o = self.options
        bad = int(events.malformed.sum())
        if bad and o.on_malformed_event_time == "fail":
            i = int(np.argmax(events.malformed))
            why = (cutoff_text(cutoff) if events.future[i] else
                   "not a time in years 1-9999, NaN, infinite, not ISO 8601, or headers nested too deep")
            raise MalformedEventTimeError(
                f"jetrabbitmq: message {ids[i]!r} on queue {o.queue!r} (routing key {rows[i].routing_key!r}) "
                f"has a malformed event time ({o.event_time}: {why}); option eventTime.onMalformed is "
                "'fail'; set it to 'null' to keep such messages, their receive time standing in")
        self._counts["malformedEventTime"] += bad
        self._counts["malformedHeaders"] += sum(1 for d in rows if d.properties.headers_malformed)

    def _reject_oversize(self, deliveries: list[Delivery]) -> list[Delivery]:
        """The deliveries whose bodies were kept; the others (over ``maxMessageSize``) are
        rejected without requeue and counted. A reject lost with the connection is redone when
        the message comes back."""
        oversize = [d for d in deliveries if d.properties.dropped_body is not None]
        if not oversize:
            return deliveries
        o = self.options
        log.warning("jetrabbitmq: %d message(s) on queue %r have bodies over maxMessageSize (%d bytes; "
                    "the first: %d bytes): rejected, to the queue's dead-letter exchange if it has one",
                    len(oversize), o.queue, o.max_message_bytes, oversize[0].properties.dropped_body)
        self.consumer.reject(oversize)
        self._counts["oversizeRejected"] += len(oversize)
        return [d for d in deliveries if d.properties.dropped_body is None]

    def _select(
        self, deliveries: list[Delivery], rows: list[Delivery], ids: list[str], seen: set[str]
    ) -> list[Delivery]:
        """Append new messages to ``rows``/``ids``; return the deliveries to ack at once
        (duplicates, and ones without an ID under ``onMissingMessageId=drop``)."""
        o = self.options
        acks_now: list[Delivery] = []
        keyed: list[tuple[Delivery, str]] = []
        for d, mid in zip(deliveries, message_ids(deliveries, o), strict=True):
            if mid is None:
                if o.on_missing_message_id == "drop":
                    acks_now.append(d)
                    self._counts["missingIdDropped"] += 1
                    continue
                if o.on_missing_message_id == "fail":
                    raise MissingMessageIdError(
                        f"jetrabbitmq: a message on queue {o.queue!r} (routing key {d.routing_key!r}, "
                        f"exchange {d.exchange!r}) has no ID ({o.message_id}); option onMissingMessageId "
                        "is 'fail'; accepted: fail | hash (ID = SHA-256 of the body) | drop (acked, counted)"
                    )
                mid = body_hash(d.body)
                self._counts["missingIdHashed"] += 1
            keyed.append((d, mid))
        committed = self.dedup.contains_many([mid for _, mid in keyed])  # one vectorized lookup
        for (d, mid), known in zip(keyed, committed, strict=True):
            if known or mid in seen:
                acks_now.append(d)
                self._counts["duplicates"] += 1
                continue
            seen.add(mid)
            rows.append(d)
            ids.append(mid)
        return acks_now
