"""Driver-side questions to the Kafka cluster: which partitions, which offsets, which timestamps."""

from __future__ import annotations

import concurrent.futures
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from confluent_kafka import OFFSET_INVALID, Consumer, IsolationLevel, KafkaException
from confluent_kafka import KafkaError as LibrdkafkaError
from confluent_kafka import TopicPartition as KTopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import OffsetSpec as KOffsetSpec

from jetspark.datasources.kafka.offsets import TopicPartition
from jetspark.datasources.kafka.options import KafkaSourceOptions
from jetspark.datasources.kafka.refusals import Refusals
from jetspark.datasources.kafka.retries import API_TIMEOUT, retriable, until_answered
from jetspark.errors import JetsparkError, OptionError
from jetspark.redaction import redact_dsn, scrub_fragments, secret_values, shown_value

T = TypeVar("T")
_CHECK_PATIENCE_S = 5.0
# librdkafka consumer-only settings an admin client would only warn about.
_CONSUMER_ONLY = ("group.", "isolation.level", "fetch.", "queued.", "max.partition.", "session.",
                  "heartbeat.", "max.poll.", "partition.assignment", "auto.", "enable.auto",
                  "check.crcs", "enable.partition.eof")


#: Kafka's internal topics, which Spark's source never matches (``listInternal(false)``).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})

class KafkaError(JetsparkError):
    """Kafka could not answer a question the source asked."""


def admin_conf(kafka: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in kafka.items() if not k.startswith(_CONSUMER_ONLY)}


def make_admin(kafka: Mapping[str, str], refusals: Refusals | None = None) -> AdminClient:
    """An admin client; a setting librdkafka rejects becomes an OptionError naming it.
    ``refusals`` becomes its error callback (:mod:`.refusals`)."""
    validate_consumer_conf(kafka)
    return AdminClient({**admin_conf(kafka), **({"error_cb": refusals} if refusals else {})})


def validate_consumer_conf(kafka: Mapping[str, str]) -> None:
    """Build (and drop) a consumer, so a bad ``kafka.*`` option fails on the driver, by name."""
    from jetspark.datasources.kafka.consumers import consumer_conf

    try:
        Consumer(consumer_conf(kafka)).close()
    except (KafkaException, ValueError, TypeError) as e:
        raise rejected_setting_error(kafka, e, _try_consumer) from None


def rejected_setting_error(kafka: Mapping[str, str], error: BaseException,
                           try_alone: Callable[[str, str], None]) -> OptionError:
    """The OptionError for a client librdkafka refused to build: it names the setting (the one
    the error quotes, else the first ``try_alone`` fails on) and shows no secret."""
    raw_text = str(error.args[0] if error.args else error)
    bad = next((k for k in kafka if f'"{k}"' in raw_text), None) or _offender(kafka, try_alone)
    option = f"kafka.{bad}" if bad else "kafka.*"
    value = kafka.get(bad) if bad else sorted(kafka)
    # librdkafka quotes the value it refuses: the text is scrubbed of every secret setting.
    text = redact_dsn(scrub_fragments(raw_text, secret_values(kafka)))
    return OptionError(option, value, f"a setting librdkafka accepts ({text})")


def _try_consumer(key: str, value: str) -> None:
    Consumer({"group.id": "jetkafka-validate", key: value}).close()


def _offender(kafka: Mapping[str, str], try_alone: Callable[[str, str], None]) -> str | None:
    """The first setting librdkafka rejects on its own (error path only)."""
    for key, value in kafka.items():
        try:
            try_alone(key, value)
        except (KafkaException, ValueError, TypeError):
            return key
    return None


class KafkaBroker:
    """A lazily opened admin client answering the source's metadata and offset questions."""

    def __init__(self, options: KafkaSourceOptions) -> None:
        self.options = options
        self._admin: AdminClient | None = None
        self._consumer: Consumer | None = None
        self._refusals = Refusals()

    def _scrub(self, error: object) -> str:
        """A librdkafka error's text without any secret setting."""
        return redact_dsn(scrub_fragments(str(error), secret_values(self.options.kafka)))

    def _servers(self) -> str:
        """The bootstrap servers, for a message (credentials in them masked)."""
        return str(shown_value("kafka.bootstrap.servers", self.options.kafka.get("bootstrap.servers", "?")))

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = make_admin(self.options.kafka, self._refusals)
        return self._admin

    @property
    def _timeout_s(self) -> float:
        """The deadline of each call (option ``kafka.default.api.timeout.ms``, :mod:`.retries`)."""
        return self.options.api_timeout_ms / 1000

    def _answered(self, call: Callable[[float], T]) -> T:
        return until_answered(call, self.admin, self._refusals, self._timeout_s, self._scrub)

    def topic_partitions(self) -> list[TopicPartition]:
        """The topic-partitions the subscription covers right now (sorted)."""
        sub = self.options.subscription
        if sub.kind == "assign":
            return sorted(sub.assigned)
        try:
            meta = self._answered(self._list_topics)
        except KafkaException as e:
            raise KafkaError(f"cannot list Kafka topics at {self._servers()} (retried up to "
                             f"{self._timeout_s:g} s, option kafka.{API_TIMEOUT}): {self._scrub(e)}"
                             ) from None
        if sub.kind == "subscribe":
            names = [t for t in sub.topics if t in meta.topics]
        else:
            # as Spark's (default, AdminClient) offset reader: searched anywhere in the name
            # (Scala's Regex.findFirstIn), Kafka's internal topics left out
            rx = re.compile(sub.pattern or "")
            names = [t for t in meta.topics if t not in INTERNAL_TOPICS and rx.search(t)]
        out = []
        for name in names:
            topic = meta.topics[name]
            if topic.error is not None:
                continue
            out.extend((name, p) for p in topic.partitions)
        return sorted(out)

    def _list_topics(self, timeout_s: float):
        """The cluster's metadata; a subscribed topic whose leader is moving is asked again."""
        meta = self.admin.list_topics(timeout=timeout_s)
        sub = self.options.subscription
        rx = re.compile(sub.pattern or "")
        for name, topic in meta.topics.items():
            wanted = name in sub.topics if sub.kind == "subscribe" else bool(sub.pattern and rx.search(name))
            if wanted and topic.error is not None and retriable(topic.error):
                raise KafkaException(topic.error)
        return meta

    def _list(self, specs: Mapping[TopicPartition, KOffsetSpec]) -> dict[TopicPartition, tuple[int, int]]:
        if not specs:
            return {}
        level = (IsolationLevel.READ_COMMITTED if self.options.isolation_committed
                 else IsolationLevel.READ_UNCOMMITTED)
        request = {KTopicPartition(t, p): spec for (t, p), spec in specs.items()}
        retries = self.options.fetch_offset_retries  # fetchOffset.numRetries / .retryIntervalMs
        for attempt in range(retries + 1):
            try:
                return self._answered(lambda t: self._list_once(request, level, t))
            except KafkaException as e:
                if attempt == retries:
                    raise KafkaError(
                        f"cannot list offsets of {sorted(specs)} at {self._servers()} ({attempt + 1} "
                        f"attempts, each retried up to {self._timeout_s:g} s; options kafka.{API_TIMEOUT}, "
                        f"fetchOffset.numRetries, fetchOffset.retryIntervalMs): {self._scrub(e)}") from None
                time.sleep(self.options.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")

    def _list_once(self, request: dict, level: IsolationLevel,
                   timeout_s: float) -> dict[TopicPartition, tuple[int, int]]:
        futures = self.admin.list_offsets(request, isolation_level=level, request_timeout=timeout_s)
        out = {}
        for ktp, fut in futures.items():
            try:
                info = fut.result(timeout=timeout_s + 5)
            except concurrent.futures.TimeoutError:  # librdkafka's own timeout should come first
                timed_out = LibrdkafkaError(LibrdkafkaError._TIMED_OUT, "list_offsets timed out")
                raise KafkaException(timed_out) from None
            if info.offset == OFFSET_INVALID:  # no answer from the partition (its leader moving): ask again,
                self.admin.list_topics(ktp.topic, timeout=timeout_s)  # with the new leader in the metadata
                moving = LibrdkafkaError(LibrdkafkaError.LEADER_NOT_AVAILABLE,
                                         f"no offset for {ktp.topic}[{ktp.partition}]", retriable=True)
                raise KafkaException(moving)
            out[(ktp.topic, ktp.partition)] = (info.offset, info.timestamp)
        return out

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: o for tp, (o, _) in self._list({tp: KOffsetSpec.earliest() for tp in tps}).items()}

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """End offsets under the consumer's isolation level (last stable offset when committed)."""
        return {tp: o for tp, (o, _) in self._list({tp: KOffsetSpec.latest() for tp in tps}).items()}

    def max_timestamp(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        """(offset, timestamp) of the record with the greatest timestamp; (-1, -1) when empty."""
        return self._list({tp: KOffsetSpec.max_timestamp() for tp in tps})

    def for_timestamps(self, stamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Earliest offset whose timestamp is >= the given one; -1 when there is none."""
        got = self._list({tp: KOffsetSpec.for_timestamp(ts) for tp, ts in stamps.items()})
        return {tp: o for tp, (o, _) in got.items()}

    def data_record_timestamps(
        self, offsets: Mapping[TopicPartition, int],
    ) -> dict[TopicPartition, int | None]:
        """Timestamp of the record at exactly each offset when it is a data record the
        consumer's isolation level shows; None when it is not (a transaction marker, an
        aborted record under read_committed, a compacted-away or deleted one).

        One fetch per partition with a consumer kept for the reader's life: the consumer
        skips control records and aborted data, so it returns a later offset (or the end).
        """
        from jetspark.datasources.kafka.consumers import consumer_conf

        out: dict[TopicPartition, int | None] = {tp: None for tp in offsets}
        if not offsets:
            return out
        if self._consumer is None:
            # Small fetches: it reads one record per partition per batch. (No queued.min.messages
            # tweak: librdkafka then backs off fetch.queue.backoff.ms, 1 s, before fetching again.)
            self._consumer = Consumer({**consumer_conf(self.options.kafka),
                                       "max.partition.fetch.bytes": str(64 << 10), "fetch.wait.max.ms": "10"})
        consumer = self._consumer
        todo = dict(offsets)
        try:
            consumer.assign([KTopicPartition(t, p, o) for (t, p), o in todo.items()])
            # A check, not a read the query depends on: a partition that does not answer soon
            # stays None (unverified), and the driver reads its range instead.
            deadline = time.monotonic() + min(self.options.poll_timeout_ms / 1000, _CHECK_PATIENCE_S)
            while todo and time.monotonic() < deadline:
                for m in consumer.consume(len(todo), 0.1):
                    tp = (m.topic(), m.partition())
                    if tp not in todo:
                        continue
                    if m.error() is None and m.offset() == todo[tp]:
                        out[tp] = m.timestamp()[1]
                    del todo[tp]  # a later offset, end of partition or an error: not a data record
        except KafkaException as e:
            raise KafkaError(f"cannot read records at {sorted(offsets.items())}: {self._scrub(e)}") from None
        finally:
            consumer.unassign()
        return out

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self._admin = None
