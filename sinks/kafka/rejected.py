"""Records Kafka will not take: kept on the dead-letter topic, or the task fails.

A record is *rejected* when Kafka refuses it for its own sake: its topic is null (and option
``topic`` is not set) or not a valid topic name, its partition does not exist, or it is
larger than the producer's ``message.max.bytes`` or its topic's ``max.message.bytes``
(read once per task, :mod:`.limits`). Topic names are checked by Kafka's rule and
partitions against the topic's metadata (asked once per task and topic, only when the rows
name partitions) before the producer sees the record: librdkafka would otherwise fail such a
record later, in its delivery report, which aborts the task's transaction and fails every
replay of the batch the same way.

``onRejected=dead-letter`` (the default): the record goes to ``deadLetterTopic`` through the
task's producer, with its key, value and headers and ``jetspark.rejected.*`` headers saying
where it was meant to go and why it was refused — in the task's transaction with
``commit=task``, so a dead letter is written once, with its partition's records.

A dead letter always fits under the producer's ``message.max.bytes`` and the dead-letter
topic's ``max.message.bytes`` (else it would be refused too, and every replay of the batch
would fail the same way): jetspark's headers come first; the record's own
``jetspark.rejected.*`` headers are removed; the topic and the reason are cut to at most
:data:`MAX_TOPIC_BYTES` / :data:`MAX_REASON_BYTES` bytes (less under a small limit), ending
with a ``…[cut: N bytes]`` marker; then, while the letter is too large (and always for a record
refused as too large), the largest of its value, headers and key is dropped, its size in
``jetspark.rejected.valueBytes`` / ``headersBytes`` / ``keyBytes``. ``jetspark.rejected.cut``
lists what was cut or removed: ``value``, ``headers``, ``key``, ``topic``, ``reason``,
``forgedHeaders``. ``onRejected=fail``: the task fails, naming the row and the reason.
"""

from __future__ import annotations

import time

import pyarrow as pa
from confluent_kafka import KafkaException, Producer

from jetspark.datasources.kafka.retries import until_answered
from jetspark.sinks.guarantees import FAIL
from jetspark.sinks.kafka.limits import TopicLimits
from jetspark.sinks.kafka.options import KafkaSinkOptions
from jetspark.sinks.kafka.rows import KafkaColumns, Rejection, produce_batch, produce_record
from jetspark.sinks.transactional import PartitionKey, SinkError

HEADER = "jetspark.rejected."
METADATA_TIMEOUT_S = 10.0
DEAD_LETTER_TOPIC_WAIT_S = 10.0
"""How long a task waits for the broker to create a missing dead-letter topic."""


class RejectingProducer:
    """One task's records through its producer, a record Kafka refuses handled as
    ``onRejected`` says. ``rows`` and ``rejected`` count what was produced and set aside."""

    def __init__(self, options: KafkaSinkOptions, columns: KafkaColumns, key: PartitionKey,
                 producer: Producer, limits: TopicLimits | None = None) -> None:
        self.options, self.columns, self.key, self.producer = options, columns, key, producer
        self.limits = limits
        self.rows = 0
        self.rejected = 0
        self._partitions: dict[str, int | None] = {}
        self._dead_letter_topic_found = False
        self._producer_limit = int(options.producer_config().get("message.max.bytes", MESSAGE_MAX_BYTES))

    @property
    def _letter_budget(self) -> int:
        """The bytes a dead letter may take: under the producer's and the topic's limits."""
        topic_limit = self.limits(self.options.dead_letter_topic) if self.limits is not None else None
        limit = self._producer_limit if topic_limit is None else min(self._producer_limit, topic_limit)
        return max(0, limit - RECORD_OVERHEAD)

    def write(self, batch: pa.RecordBatch) -> int:
        """Produce ``batch``; the number of its records handed to the producer."""
        seen = self.rows + self.rejected
        rows = produce_batch(self.producer.produce, self.producer.poll, batch, self.columns,
                             self.options.topic, lambda *a: self._reject(seen, *a), self.partitions,
                             self.limits)
        self.rows += rows
        return rows

    def partitions(self, topic: str) -> int | None:
        """The topic's partition count from its metadata, asked once a task; None when the
        broker does not know the topic (it may be creating it) or cannot say."""
        if topic not in self._partitions:
            self._partitions[topic] = self._ask(topic)
        return self._partitions[topic]

    def _ask(self, topic: str) -> int | None:
        try:
            metadata = until_answered(lambda t: self.producer.list_topics(topic=topic, timeout=t), None, None,
                                      METADATA_TIMEOUT_S, self.options.scrub)
        except KafkaException:
            return None  # the producer meets the same trouble and reports it
        found = metadata.topics.get(topic)
        return (len(found.partitions) or None) if found is not None else None

    def _reject(self, seen: int, rejection: Rejection, value: object, key: object,
                headers: list | None) -> None:
        reason, scrub = rejection.why.reason, self.options.scrub
        where = f"row {seen + rejection.row} of batch {self.key.batch_id}, partition {self.key.partition_id}"
        topic = self.options.dead_letter_topic
        if self.options.on_rejected == FAIL:
            raise SinkError(f"jetkafka: Kafka refuses {where}: {scrub(reason)}. With onRejected=fail the "
                            f"query stops here; onRejected=dead-letter (the default) writes such records to "
                            f"the dead-letter topic {topic} and goes on")
        self._find_dead_letter_topic()
        value, key, letter_headers = dead_letter(rejection, reason, self.key, value, key, headers,
                                                 self._letter_budget)
        unfit = produce_record(self.producer.produce, self.producer.poll, topic, value, key, None,
                               letter_headers)
        if unfit is not None:
            raise SinkError(f"jetkafka: Kafka refuses {where} ({scrub(reason)}), and its dead letter for "
                            f"topic {topic} too: {scrub(unfit.reason)}. Choose another deadLetterTopic, or "
                            f"set onRejected=fail")
        self.rejected += 1

    def _find_dead_letter_topic(self) -> None:
        """Make sure the dead-letter topic exists, once a task: asking its metadata makes a
        broker that creates topics create it; one that does not is named in the error."""
        if self._dead_letter_topic_found:
            return
        topic = self.options.dead_letter_topic
        deadline = time.monotonic() + DEAD_LETTER_TOPIC_WAIT_S
        while self._ask(topic) is None:
            if time.monotonic() > deadline:
                raise SinkError(f"jetkafka: records were refused and go to the dead-letter topic {topic} "
                                f"(option deadLetterTopic), which does not exist, and the brokers at "
                                f"{self.options.bootstrap} do not create it: create it, choose another, or "
                                f"set onRejected=fail")
            time.sleep(0.2)
        self._dead_letter_topic_found = True


MESSAGE_MAX_BYTES = 1_000_000
"""librdkafka's default ``message.max.bytes`` (option ``kafka.message.max.bytes`` sets it)."""
RECORD_OVERHEAD = 256
"""Room for a record's framing in librdkafka's size check (61 bytes at most for Kafka's v2 format)."""
HEADER_OVERHEAD = 10
"""A header's framing: the varint lengths of its name and value."""
MAX_TOPIC_BYTES = 512
MAX_REASON_BYTES = 2048
_PARTS = ("value", "headers", "key")  # what a dead letter may drop, the largest first


def dead_letter(rejection: Rejection, reason: str, task: PartitionKey, value: object, key: object,
                headers: list | None, budget: int) -> tuple[object, object, list]:
    """The value, key and headers of a rejected record's dead letter, at most ``budget`` bytes."""
    cut: list[str] = []
    topic = cut_text(rejection.topic or "", min(MAX_TOPIC_BYTES, budget // 8), cut, "topic")
    reason = cut_text(reason, min(MAX_REASON_BYTES, budget // 4), cut, "reason")
    own = [(k, v) for k, v in headers or () if not str(k).lower().startswith(HEADER)]
    if len(own) < len(headers or ()):
        cut.append("forgedHeaders")
    marks = [("topic", topic), ("partition", "" if rejection.partition is None else str(rejection.partition)),
             ("reason", reason), ("sink", task.sink_id), ("batch", str(task.batch_id))]
    parts = {"value": value, "headers": own, "key": key}
    sizes = {"value": _size(value), "headers": sum(_header_size(k, v) for k, v in own), "key": _size(key)}
    reserve = sum(_header_size(HEADER + n, t) for n, t in marks) + 3 * 40 + 64  # sizes and the cut list
    must_drop = rejection.why.too_large
    while any(sizes[p] or parts[p] for p in _PARTS) and (
            must_drop or reserve + sum(sizes.values()) > budget):
        part = max((p for p in _PARTS if sizes[p] or parts[p]), key=lambda p: sizes[p])
        shown = sizes[part] - HEADER_OVERHEAD * len(own) if part == "headers" else sizes[part]
        marks.append((part + "Bytes", str(shown)))  # headers: their names' and values' bytes
        cut.append(part)
        parts[part], sizes[part], must_drop = None, 0, False
    over = reserve + sum(sizes.values()) - budget
    if over > 0:  # a message.max.bytes of a few hundred bytes: the reason gives way
        marks[2] = ("reason", cut_text(reason, max(0, _size(reason) - over - 32), cut, "reason"))
    if cut:
        marks.append(("cut", ",".join(dict.fromkeys(cut))))
    letter_headers = [*((HEADER + name, text) for name, text in marks), *(parts["headers"] or ())]
    return parts["value"], parts["key"], letter_headers


def cut_text(text: str, max_bytes: int, cut: list[str], name: str) -> str:
    """``text`` in at most ``max_bytes`` UTF-8 bytes plus a ``…[cut: N bytes]`` marker (N: the
    whole size); ``name`` is added to ``cut`` when it was cut."""
    raw = text.encode(errors="backslashreplace")
    if len(raw) <= max_bytes:
        return text
    if name not in cut:
        cut.append(name)
    return raw[:max_bytes].decode(errors="ignore") + f"…[cut: {len(raw)} bytes]"


def _header_size(name: object, value: object) -> int:
    return len(str(name).encode(errors="backslashreplace")) + _size(value) + HEADER_OVERHEAD


def _size(value: object) -> int:
    if value is None:
        return 0
    return len(value.encode(errors="backslashreplace") if isinstance(value, str) else value)  # type: ignore[arg-type]
