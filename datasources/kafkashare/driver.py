"""The driver's side of ``jetkafkashare``: one share consumer (explicit acknowledgement) that
acquires each micro-batch's records in one poll and ACCEPTs them only after Spark committed
the batch (docs/design.md, "Share groups: exactly once over a Kafka queue").

Offsets (Spark's offset log)::

    {"seq": N,
     "acquired":    {topic: {partition: [[start, end, deliveryCount], ...]}},  # batch N's rows
     "absorbed":    {topic: {partition: [[start, end, deliveryCount], ...]}},  # redeliveries, not rows
     "unconfirmed": {topic: {partition: [[start, end, addedMs], ...]}},        # dedup of redeliveries
     "readers":     {"value": {...}}}  # typed keys/values: the reader schemas (jetkafka's)

A record of a committed batch whose ACCEPT this member could not confirm (a crash, an expired
lock) comes back; its (topic, partition, offset) is then in ``unconfirmed`` (or in the pending
batches of this member), so it is ACCEPTed with the next batch and not emitted again.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

import numpy as np
from confluent_kafka import AcknowledgeType, IllegalStateException, KafkaException, ShareConsumer

from jetspark import faults
from jetspark.datasources.kafkashare.acquired import OffsetSet, Runs
from jetspark.datasources.kafkashare.options import ShareOptions
from jetspark.errors import JetsparkError

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ShareDriver:
    """Acquires, records and acknowledges the batches of one query (never pickled)."""

    def __init__(self, options: ShareOptions) -> None:
        self.options = options
        self._consumer: ShareConsumer | None = None
        self._pending: dict[int, OffsetSet] = {}
        """Batches this member acquired (emitted and absorbed records), by seq, not yet ACCEPTed."""
        self._unconfirmed = OffsetSet()
        self._restored = False
        self._polled = False
        self._target: dict[tuple[str, int], int] | None = None
        """``Trigger.AvailableNow``: each partition's end offset when the query began."""

    @property
    def consumer(self) -> ShareConsumer:
        if self._consumer is None:
            conf = {**self.options.kafka, "share.acknowledgement.mode": "explicit",
                    "max.poll.records": str(self.options.max_records)}
            consumer = ShareConsumer(conf)
            consumer.subscribe(list(self.options.topics))
            self._consumer = consumer
            self._leave_on_sigterm()
        return self._consumer

    def _leave_on_sigterm(self) -> None:
        """Leave the group when Spark ends this process. Spark stops a query's source by ending
        its Python process with SIGTERM, never calling ``stop()``; a member that does not leave
        keeps its partitions assigned until the group's session timeout
        (``group.share.session.timeout.ms``, 45 s by default), so a restarted query, or another
        member, got no record of them until then. The previous handler runs after."""
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers are the main thread's (Spark calls the source from it)
        previous = signal.getsignal(signal.SIGTERM)

        def leave(signum, frame) -> None:
            try:
                self.stop()
            finally:
                signal.signal(signal.SIGTERM, previous)
                if callable(previous):
                    previous(signum, frame)
                else:
                    os.kill(os.getpid(), signum)

        signal.signal(signal.SIGTERM, leave)

    @staticmethod
    def initial_offset() -> dict:
        return {"seq": 0, "acquired": {}, "absorbed": {}, "unconfirmed": {}}

    # -- Spark's calls ----------------------------------------------------------------------
    def latest_offset(self, start: dict) -> dict:
        """ACCEPT every batch through ``start`` (Spark committed it before asking for the next),
        then acquire the next batch in one poll and return its offset (``start`` when the poll
        brought nothing: no batch)."""
        seq = int(start["seq"])
        self._restore(start)
        self.accept_through(seq)
        msgs = self._poll()
        if self._target is not None:
            msgs = self._before_target(msgs)
        if not msgs:
            return start
        faults.point("kafkashare.after_acquire")
        emitted, absorbed = self._split(msgs)
        self._pending[seq + 1] = _union(emitted, absorbed)
        self._expire()
        offset = {"seq": seq + 1, "acquired": emitted.runs(), "absorbed": absorbed.runs(),
                  "unconfirmed": self._unconfirmed.runs()}
        if self.options.typed:  # a replay decodes with the reader schemas it was planned with
            offset["readers"] = {t.column: t.reader for t in self.options.typed}
        return offset

    def prepare_available_now(self) -> None:
        """``Trigger.AvailableNow``: the records produced until now are the query's target.
        Batches go on while polls bring such records, and the last batch's ACCEPT comes with
        the trigger that finds none (Spark asks for one more batch before it ends the query)."""
        from confluent_kafka import Consumer, TopicPartition

        probe = Consumer({**self.options.reader_kafka, "enable.auto.commit": "false"})
        try:
            topics = probe.list_topics(timeout=self.options.kafka_timeout_s).topics
            self._target = {
                (topic, p): probe.get_watermark_offsets(TopicPartition(topic, p),
                                                        timeout=self.options.kafka_timeout_s)[1]
                for topic in self.options.topics if topic in topics
                for p in topics[topic].partitions}
        finally:
            probe.close()

    def _before_target(self, msgs: list) -> list:
        """The records produced before ``Trigger.AvailableNow`` began; the later ones are
        RELEASEd at once (the group hands them out again, to the next run or another member;
        a record is later than one run's start at most once, so at most one extra delivery)."""
        within, later = [], False
        for m in msgs:
            if m.offset() < self._target.get((m.topic(), m.partition()), 0):
                within.append(m)
            else:
                later = True
                self.consumer.acknowledge_offset(m.topic(), m.partition(), m.offset(),
                                                 AcknowledgeType.RELEASE)
        if later and not within:  # no batch to carry the RELEASEs: send them now
            self.consumer.commit_sync(self.options.kafka_timeout_s)
        return within

    def planned(self, start: dict, end: dict) -> None:
        """Spark plans the batch ``end``: one this member did not acquire (a replay after a
        restart) has records held by a dead member, which come back: remember them."""
        faults.point("kafkashare.before_batch")  # the batch is in Spark's offset log, not yet run
        self._restore(start)
        seq = int(end["seq"])
        if seq not in self._pending:
            now = _now_ms()
            for key in ("acquired", "absorbed"):
                _add_at(self._unconfirmed, end.get(key, {}), now)
            self._unconfirmed.add_runs(end.get("unconfirmed", {}))

    def accept_through(self, seq: int) -> None:
        """ACCEPT the records of this member's batches up to ``seq`` and wait for the broker's
        answer; what it does not confirm stays in ``unconfirmed`` for its redelivery."""
        done = sorted(s for s in self._pending if s <= seq)
        if not done:
            return
        consumer = self.consumer
        batches = [self._pending[s] for s in done]
        for batch in batches:
            for topic, partition, offsets, _ in batch.items():
                for offset in offsets.tolist():
                    try:
                        consumer.acknowledge_offset(topic, partition, offset, AcknowledgeType.ACCEPT)
                    except IllegalStateException as e:  # its lock expired: it comes back
                        log.warning("jetkafkashare: cannot ACCEPT %s[%d]@%d (%s); its redelivery "
                                    "will be recognised", topic, partition, offset, e)
                        self._unconfirmed.add(topic, partition, np.array([offset]), np.array([_now_ms()]))
        faults.point("kafkashare.before_accept")
        try:
            results = consumer.commit_sync(self.options.kafka_timeout_s)
        except KafkaException as e:
            results = {None: e}
        errors = {(tp.topic, tp.partition) if tp is not None else None: err
                  for tp, err in results.items() if err is not None}
        failed = {key for key in errors if key is not None}
        everything = None in results
        now = _now_ms()
        for batch in batches:
            for topic, partition, offsets, _ in batch.items():
                if everything or (topic, partition) in failed:
                    self._unconfirmed.add(topic, partition, offsets, np.full(len(offsets), now))
        for s in done:
            del self._pending[s]
        if everything or failed:
            log.warning("jetkafkashare: ACCEPT not confirmed (%s); redeliveries will be recognised",
                        "; ".join(f"{key or 'all partitions'}: {err}" for key, err in errors.items()))
        faults.point("kafkashare.after_accept")  # the broker answered; the next batch not acquired

    def stop(self) -> None:
        """Leave the group: what this member holds and did not ACCEPT is released."""
        if self._consumer is not None:
            try:
                self._consumer.close()
            finally:
                self._consumer = None

    # -- steps ------------------------------------------------------------------------------
    def _restore(self, start: dict) -> None:
        """A new driver (a restart): the records of ``start``'s batch were acquired by a member
        that is gone; if their ACCEPT did not reach the broker they come back."""
        if self._restored:
            return
        self._restored = True
        if int(start.get("seq", 0)) in self._pending:
            return
        now = _now_ms()
        _add_at(self._unconfirmed, start.get("acquired", {}), now)
        _add_at(self._unconfirmed, start.get("absorbed", {}), now)
        self._unconfirmed.add_runs(start.get("unconfirmed", {}))

    def _poll(self) -> list:
        """One poll's records (the client allows no second poll before all are acknowledged).
        A driver's first poll waits up to ``firstAcquireTimeoutMs`` while it joins the group."""
        consumer = self.consumer
        if self._polled:
            return self._checked(consumer.poll(self.options.acquire_timeout_ms / 1000))
        deadline = time.monotonic() + self.options.first_acquire_timeout_ms / 1000
        while True:
            msgs = self._checked(consumer.poll(min(1.0, self.options.acquire_timeout_ms / 1000)))
            if msgs or time.monotonic() >= deadline:
                self._polled = True
                return msgs

    @staticmethod
    def _checked(msgs) -> list:
        out = []
        for m in msgs:
            err = m.error()
            if err is None:
                out.append(m)
            elif err.fatal() or not err.retriable():
                raise JetsparkError(f"jetkafkashare: the share consumer failed: {err}")
            else:
                log.warning("jetkafkashare: %s", err)
        return out

    def _split(self, msgs: list) -> tuple[OffsetSet, OffsetSet]:
        """The poll's records → (emitted, absorbed): a record already in a batch of this query
        (pending here, or committed with its ACCEPT unconfirmed) is absorbed."""
        by_part: dict[tuple[str, int], tuple[list[int], list[int]]] = {}
        for m in msgs:
            offsets, counts = by_part.setdefault((m.topic(), m.partition()), ([], []))
            offsets.append(m.offset())
            counts.append(m.delivery_count() or 1)
        emitted, absorbed = OffsetSet(), OffsetSet()
        for (topic, partition), (offs, cnts) in by_part.items():
            o, c = np.asarray(offs, np.int64), np.asarray(cnts, np.int64)
            seen = self._unconfirmed.contains(topic, partition, o)
            for batch in self._pending.values():
                seen |= batch.contains(topic, partition, o)
            emitted.add(topic, partition, o[~seen], c[~seen])
            absorbed.add(topic, partition, o[seen], c[seen])
            if seen.any():
                self._unconfirmed.remove(topic, partition, o[seen])  # this member holds them now
        if len(absorbed):
            log.info("jetkafkashare: %d redelivered record(s) already in a batch: ACCEPTed, not emitted",
                     len(absorbed))
        return emitted, absorbed

    def _expire(self) -> None:
        self._unconfirmed.drop_values_below(_now_ms() - self.options.redelivery_window_ms)


def _union(a: OffsetSet, b: OffsetSet) -> OffsetSet:
    out = OffsetSet()
    for s in (a, b):
        for topic, partition, o, v in s.items():
            out.add(topic, partition, o, v)
    return out


def _add_at(target: OffsetSet, runs: Runs, now: int) -> None:
    """The offsets of ``runs``, each valued ``now`` (the time they became unconfirmed)."""
    for topic, parts in runs.items():
        for partition, rs in parts.items():
            for start, end, _ in rs:
                offsets = np.arange(start, end, dtype=np.int64)
                target.add(topic, int(partition), offsets, np.full(len(offsets), now))
