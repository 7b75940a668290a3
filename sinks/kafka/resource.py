"""Kafka as a :class:`TransactionalResource`: a transactional producer per sink partition.

* ``transactional.id`` = ``<prefix>.<sink id>.<partition>``, stable across attempts and
  restarts: ``init_transactions`` of a new attempt fences every older producer with that
  id (a zombie attempt's later commit fails) and aborts its open transaction.
* The marker is a consumer-group offset committed *in the same transaction* as the records
  (``send_offsets_to_transaction``): group ``<transactional id>``, partition 0 of the marker
  topic, offset = batch id + 1. A replayed batch whose marker says it committed is skipped.
* Kafka cannot commit a prepared transaction from another process (KIP-939 is not
  available), so ``supports_remote_commit`` is False: each task commits its own
  transaction. Records are visible to ``isolation.level=read_committed`` consumers once
  the task commits, before Spark records the batch; a replay never writes them again.
* A transaction left open by a dead driver blocks read_committed consumers of its
  partitions (the last stable offset) until the same transactional id is initialised
  again (query restart) or ``transaction.timeout.ms`` passes (librdkafka default 60 s).
* Markers are offsets of an inactive group: the broker expires them after
  ``offsets.retention.minutes`` (7 days by default). Only a query stopped longer than that
  exactly between a task commit and Spark's batch commit could write that batch twice.
"""

from __future__ import annotations

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from jetspark import faults
from jetspark.datasources.kafka.broker import rejected_setting_error
from jetspark.datasources.kafka.refusals import Refusals, flush_until_delivered
from jetspark.datasources.kafka.retries import retriable, until_answered
from jetspark.datasources.kafka.scopes import consumer_settings
from jetspark.sinks.kafka.limits import BATCH_SIZE, TopicLimits
from jetspark.sinks.kafka.options import KafkaSinkOptions
from jetspark.sinks.kafka.rejected import RejectingProducer
from jetspark.sinks.kafka.rows import KafkaColumns
from jetspark.sinks.transactional import DURING_RECOVERY, PartitionKey, SinkError, TransactionalResource

TIMEOUT_S = 60.0
# Throughput settings; any kafka.* option given by the user wins.
PRODUCER_DEFAULTS = {
    "linger.ms": "20",
    "batch.size": "1000000",
    "queue.buffering.max.messages": "1000000",
    "queue.buffering.max.kbytes": "1048576",
}


class DeliveryErrors:
    """Collects failed deliveries (librdkafka calls back for errors only)."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def __call__(self, err: KafkaError | None, msg: object) -> None:
        if err is not None:
            self.errors.append(str(err))


def make_producer(options: KafkaSinkOptions, extra: dict[str, object], errors: DeliveryErrors,
                  limits: TopicLimits | None = None) -> Producer:
    """The task's producer; with ``limits``, its ``batch.size`` under the topics' size limits."""
    config: dict[str, object] = {**PRODUCER_DEFAULTS, **options.producer_config(), **extra,
                                 "on_delivery": errors, "delivery.report.only.error": True}
    if limits is not None:
        try:
            config[BATCH_SIZE] = str(limits.batch_size(int(str(config[BATCH_SIZE]))))
        except ValueError:
            pass  # not a number: librdkafka's error names it below
    try:
        return Producer(config)
    except KafkaException as e:
        error = rejected_setting_error(options.producer_config(), e, _try_producer)
        raise SinkError(f"cannot create a Kafka producer for {options.bootstrap}: {error}") from None


def _try_producer(key: str, value: str) -> None:
    Producer({key: value})


class KafkaResource(TransactionalResource):
    """One task's transactional producer and marker group."""

    supports_remote_commit = False

    def __init__(self, options: KafkaSinkOptions, columns: KafkaColumns) -> None:
        if options.marker_topic is None:
            raise SinkError("the transactional Kafka sink needs a marker topic")
        self.options = options
        self.columns = columns
        self._errors = DeliveryErrors()
        self._refusals = Refusals()
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._key: PartitionKey | None = None
        self._records: RejectingProducer | None = None
        self._limits: TopicLimits | None = None
        self._in_transaction = False

    @property
    def rejected(self) -> int:  # type: ignore[override]
        return self._records.rejected if self._records is not None else 0

    def _marker_partition(self, offset: int | None = None) -> TopicPartition:
        assert self.options.marker_topic is not None
        if offset is None:
            return TopicPartition(self.options.marker_topic, 0)
        return TopicPartition(self.options.marker_topic, 0, offset)

    def recover(self, key: PartitionKey) -> bool:
        tid = self.options.transactional_id(key.sink_id, key.partition_id)
        self._limits = TopicLimits(self.options, (self.options.topic, self.options.dead_letter_topic))
        self._producer = make_producer(self.options, {"transactional.id": tid, "error_cb": self._refusals},
                                       self._errors, self._limits)
        self._consumer = Consumer({
            "bootstrap.servers": self.options.bootstrap, **consumer_settings(self.options.producer_config()),
            "group.id": tid, "enable.auto.commit": "false", "isolation.level": "read_committed",
        })
        try:  # fences older attempts, ends their transaction
            until_answered(self._require_producer().init_transactions, self._producer, self._refusals,
                           self.options.api_timeout_s, self.options.scrub)
        except KafkaException as e:
            raise SinkError(f"Kafka init_transactions failed ({self.options.bootstrap}): "
                            f"{self.options.scrub(str(e))}") from None
        committed = self._call_consumer_committed()
        if committed >= key.batch_id + 1:
            faults.point(DURING_RECOVERY)
            return True
        return False

    def begin(self, key: PartitionKey) -> None:
        self._key = key
        self._records = RejectingProducer(self.options, self.columns, key, self._require_producer(),
                                          self._limits)
        self._call("begin_transaction")
        self._in_transaction = True

    def write(self, batch: pa.RecordBatch) -> int:
        if self._records is None:
            raise SinkError("begin() must run first")
        return self._records.write(batch)

    def prepare(self) -> str:
        key = self._key
        assert key is not None and self._consumer is not None
        self._flush()
        self._call("send_offsets_to_transaction", [self._marker_partition(key.batch_id + 1)],
                   self._consumer.consumer_group_metadata(), timed=True)
        return self.options.transactional_id(key.sink_id, key.partition_id)

    def commit(self, handle: str) -> None:
        if not self._in_transaction:
            raise SinkError(f"Kafka transaction {handle!r} cannot be committed from another process "
                            f"(KIP-939)")
        self._call("commit_transaction", timed=True)
        self._in_transaction = False

    def rollback(self, handle: str | None = None) -> None:
        # A remote handle cannot be aborted either; the next init_transactions of its id or
        # the transaction timeout aborts it.
        if handle is None and self._in_transaction and self._producer is not None:
            self._in_transaction = False
            try:
                self._producer.abort_transaction(TIMEOUT_S)
            except KafkaException:
                pass  # fenced or fatal: the broker aborts it when the id is used again

    def rollback_strays(self, sink_id: str, up_to_batch: int) -> list[str]:
        return []  # fencing by transactional.id resolves every other attempt

    def close(self) -> None:
        self.rollback()
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self._producer = None

    def _require_producer(self) -> Producer:
        if self._producer is None:
            raise SinkError("recover() must run first: it creates the transactional producer")
        return self._producer

    def _flush(self) -> None:
        producer = self._require_producer()
        remaining = flush_until_delivered(producer, self._refusals, TIMEOUT_S, self.options.scrub)
        if remaining:
            raise SinkError(f"{remaining} records not delivered to Kafka ({self.options.bootstrap}) "
                            f"within {TIMEOUT_S:.0f} s")
        if self._errors.errors:
            raise SinkError(f"{len(self._errors.errors)} records failed delivery to Kafka, first: "
                            f"{self.options.scrub(self._errors.errors[0])}")

    def _call(self, method: str, *args: object, timed: bool = False) -> None:
        """A transactional call; ``timed`` ones take a timeout and are made again while they fail
        with a retriable error (librdkafka's rule for them), within ``kafka.default.api.timeout.ms``."""
        producer = self._require_producer()
        call = getattr(producer, method)
        try:
            if timed:
                until_answered(lambda t: call(*args, t), producer, self._refusals, self.options.api_timeout_s,
                               self.options.scrub)
            else:
                call(*args)
        except KafkaException as e:
            raise SinkError(f"Kafka {method} failed ({self.options.bootstrap}): "
                            f"{self.options.scrub(str(e))}") from None

    def _call_consumer_committed(self) -> int:
        consumer = self._consumer
        assert consumer is not None

        def committed(timeout_s: float) -> TopicPartition:
            [tp] = consumer.committed([self._marker_partition()], timeout=timeout_s)
            if tp.error is not None and retriable(tp.error):
                raise KafkaException(tp.error)
            return tp

        try:
            tp = until_answered(committed, None, None, self.options.api_timeout_s, self.options.scrub)
        except KafkaException as e:
            raise SinkError(f"reading the sink marker from Kafka failed ({self.options.bootstrap}): "
                            f"{self.options.scrub(str(e))}") from None
        if tp.error is not None:
            raise SinkError(f"reading the sink marker on {self.options.marker_topic}[0] failed: {tp.error}")
        return tp.offset if tp.offset >= 0 else 0

