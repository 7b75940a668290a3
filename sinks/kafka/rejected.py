"""Records Kafka will not take: kept on the dead-letter topic, or the task fails.

A record is *rejected* when Kafka refuses it for its own sake: its topic is null (and option
``topic`` is not set) or not a valid topic name, its partition does not exist, or it is
larger than the producer's ``message.max.bytes``. Topic names are checked by Kafka's rule and
partitions against the topic's metadata (asked once per task and topic, only when the rows
name partitions) before the producer sees the record: librdkafka would otherwise fail such a
record later, in its delivery report, which aborts the task's transaction and fails every
replay of the batch the same way.

``onRejected=dead-letter`` (the default): the record goes to ``deadLetterTopic`` through the
task's producer, with its key, value and headers and ``jetspark.rejected.*`` headers saying
where it was meant to go and why it was refused — in the task's transaction with
``commit=task``, so a dead letter is written once, with its partition's records. A record
over ``message.max.bytes`` keeps its key and headers but not its value (which would be refused
again); ``jetspark.rejected.valueBytes`` gives the value's size. ``onRejected=fail``: the task
fails, naming the row and the reason.
"""

from __future__ import annotations

import time

import pyarrow as pa
from confluent_kafka import KafkaException, Producer

from jetspark.sinks.guarantees import FAIL
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
                 producer: Producer) -> None:
        self.options, self.columns, self.key, self.producer = options, columns, key, producer
        self.rows = 0
        self.rejected = 0
        self._partitions: dict[str, int | None] = {}
        self._dead_letter_topic_found = False

    def write(self, batch: pa.RecordBatch) -> int:
        """Produce ``batch``; the number of its records handed to the producer."""
        seen = self.rows + self.rejected
        rows = produce_batch(self.producer.produce, self.producer.poll, batch, self.columns,
                             self.options.topic, lambda *a: self._reject(seen, *a), self.partitions)
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
            metadata = self.producer.list_topics(topic=topic, timeout=METADATA_TIMEOUT_S)
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
        partition = "" if rejection.partition is None else str(rejection.partition)
        marks = [("topic", rejection.topic or ""), ("partition", partition), ("reason", reason),
                 ("sink", self.key.sink_id), ("batch", str(self.key.batch_id))]
        if rejection.why.too_large:
            marks.append(("valueBytes", str(_size(value))))
            value = None
        self._find_dead_letter_topic()
        letter_headers = [*(headers or []), *((HEADER + name, text) for name, text in marks)]
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


def _size(value: object) -> int:
    if value is None:
        return 0
    return len(value.encode() if isinstance(value, str) else value)  # type: ignore[arg-type]
