"""``commitOffsetsToGroup``: a query's progress, committed to a Kafka consumer group for
Kafka's own lag tools (kafka-consumer-groups.sh, Burrow, lag exporters) — write-only.

The offsets that drive the query stay in Spark's checkpoint; what is committed here is never
read back (docs/design.md, "jetkafka offsets"). A batch's end offsets are committed once Spark
has written the batch to its commit log: in ``commit(end)``, and already when Spark next asks
for ``latestOffset`` from that end (Spark asks only after the batch committed; ``commit(end)``
comes when the next batch is planned, so without this the group would stay a batch behind
while the topic is quiet). A commit that fails is logged and retried with the next batch: the
query never fails for the group's sake.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KTopicPartition

from jetspark.datasources.kafka.offsets import TopicPartition

log = logging.getLogger(__name__)


class GroupCommitter:
    """Commits next-offsets to the consumer group of ``kafka["group.id"]``, each change once."""

    def __init__(self, kafka: Mapping[str, str]) -> None:
        self.kafka = dict(kafka)
        self._consumer: Consumer | None = None
        self._committed: dict[TopicPartition, int] = {}

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        changed = {tp: o for tp, o in offsets.items() if o >= 0 and self._committed.get(tp) != o}
        if not changed:
            return
        if self._consumer is None:
            from jetspark.datasources.kafka.consumers import consumer_conf

            self._consumer = Consumer(consumer_conf(self.kafka))
        try:
            self._consumer.commit(offsets=[KTopicPartition(t, p, o) for (t, p), o in sorted(changed.items())],
                                  asynchronous=False)
        except KafkaException as e:
            log.warning("jetkafka: commitOffsetsToGroup: committing to group %r failed (%s); "
                        "the next batch tries again", self.kafka.get("group.id"), e.args[0] if e.args else e)
            return
        self._committed.update(changed)

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
