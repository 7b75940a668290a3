"""Records Kafka will not take: kept on the dead-letter topic, or the task fails.

A record is *rejected* when Kafka refuses it for its own sake: its topic is null (and option
``topic`` is not set) or not a valid topic name, its partition does not exist, or it is
larger than the producer's ``message.max.bytes``. The topic and partition are checked against
the topic's metadata before the producer sees the record: librdkafka would otherwise fail
such a record later, in its delivery report, which aborts the task's transaction and fails
every replay of the batch the same way.

``onRejected=dead-letter`` (the default): the record goes to ``deadLetterTopic`` through the
task's producer, with its key, value and headers and ``jetspark.rejected.*`` headers saying
where it was meant to go and why it was refused — in the task's transaction with
``commit=task``, so a dead letter is written once, with its partition's records. A record
over ``message.max.bytes`` keeps its key and headers but not its value (which would be refused
again); ``jetspark.rejected.valueBytes`` gives the value's size. ``onRejected=fail``: the task
fails, naming the row and the reason.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException, Producer

from jetspark.sinks.guarantees import FAIL
from jetspark.sinks.kafka.options import KafkaSinkOptions
from jetspark.sinks.kafka.rows import Rejection, produce_record
from jetspark.sinks.transactional import PartitionKey, SinkError

HEADER = "jetspark.rejected."
METADATA_TIMEOUT_S = 10.0


class Rejections:
    """One task's rejected records: the ``reject`` and ``partitions`` of
    :func:`~jetspark.sinks.kafka.rows.produce_batch`, and how many went to the dead-letter topic."""

    def __init__(self, options: KafkaSinkOptions, key: PartitionKey, producer: Producer) -> None:
        self.options = options
        self.key = key
        self.producer = producer
        self.count = 0
        self._partitions: dict[str, int | str | None] = {}

    def partitions(self, topic: str) -> int | str | None:
        """The topic's partition count from its metadata (asked once a task); None when the
        broker does not know it yet (it may be creating it) or cannot say; the reason when no
        record can go there."""
        if topic not in self._partitions:
            self._partitions[topic] = self._ask(topic)
        return self._partitions[topic]

    def _ask(self, topic: str) -> int | str | None:
        try:
            metadata = self.producer.list_topics(topic=topic, timeout=METADATA_TIMEOUT_S)
        except KafkaException:
            return None  # the producer meets the same trouble and reports it
        found = metadata.topics.get(topic)
        if found is None:
            return None
        if found.error is not None:
            return (f"not a valid topic name ({found.error.str()})"
                    if found.error.code() == KafkaError.TOPIC_EXCEPTION else None)
        return len(found.partitions) or None

    def __call__(self, rejection: Rejection, value: object, key: object, headers: list | None) -> None:
        where = (f"row {rejection.row} of batch {self.key.batch_id}, partition {self.key.partition_id}")
        if self.options.on_rejected == FAIL:
            raise SinkError(f"jetkafka: Kafka refuses {where}: {self.options.scrub(rejection.reason)}. With "
                            f"onRejected=fail the query stops here; onRejected=dead-letter (the default) "
                            f"writes such records to the dead-letter topic {self.options.dead_letter_topic} "
                            f"and goes on")
        marks = [("topic", rejection.topic or ""), ("partition", "" if rejection.partition is None
                                                    else str(rejection.partition)),
                 ("reason", rejection.reason), ("sink", self.key.sink_id), ("batch", str(self.key.batch_id))]
        if rejection.too_large:
            marks.append(("valueBytes", str(_size(value))))
            value = None
        letter_headers = [*(headers or []), *((HEADER + name, text) for name, text in marks)]
        topic = self.options.dead_letter_topic
        why = self._unusable(topic) or produce_record(self.producer.produce, self.producer.poll, topic, value,
                                                      key, None, letter_headers)
        if why is not None:
            raise SinkError(f"jetkafka: Kafka refuses {where} ({self.options.scrub(rejection.reason)}), and "
                            f"its dead letter for topic {topic} too: {why[0]}. Choose another "
                            f"deadLetterTopic, or set onRejected=fail")
        self.count += 1

    def _unusable(self, topic: str) -> tuple[str, bool] | None:
        count = self.partitions(topic)
        return (count, False) if isinstance(count, str) else None


def _size(value: object) -> int:
    if value is None:
        return 0
    return len(value.encode() if isinstance(value, str) else value)  # type: ignore[arg-type]
