"""The brokers' size limit of each topic the sink writes to (the topic's ``max.message.bytes``).

A record the producer takes (it is under the producer's ``message.max.bytes``) but larger than
its topic's ``max.message.bytes`` is refused by the broker (``MSG_SIZE_TOO_LARGE``) only in the
delivery report: the task's transaction cannot commit, and every replay of the batch fails the
same way. So a task reads the limit of each topic it writes to once (Kafka's DescribeConfigs),
and the sink refuses such a record itself (:mod:`.rejected`: a dead letter, or
``onRejected=fail``), judging the record by its size before compression with Kafka's framing
(:func:`jetspark.sinks.kafka.rows.record_sizes`). The producer's ``batch.size`` is held under the
smallest limit of the topics the options name (``topic``, ``deadLetterTopic``), so that records
batched together are not refused as one batch. A topic whose limit cannot be read (it does not
exist yet, or DescribeConfigs is not allowed) is not checked: the broker's answer stands.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from jetspark.datasources.kafka.refusals import Refusals
from jetspark.datasources.kafka.retries import retriable, until_answered

if TYPE_CHECKING:
    from jetspark.sinks.kafka.options import KafkaSinkOptions

log = logging.getLogger(__name__)

LIMIT = "max.message.bytes"
BATCH_SIZE = "batch.size"


class TopicLimits:
    """``max.message.bytes`` of each topic, read once per task (None: not known)."""

    def __init__(self, options: KafkaSinkOptions, topics: Iterable[str | None] = ()) -> None:
        self.options = options
        self._limits: dict[str, int | None] = {}
        self._admin: AdminClient | None = None
        self._refusals = Refusals()
        self.read(t for t in topics if t)

    def __call__(self, topic: str | None) -> int | None:
        """The topic's limit, read now if this task has not read it yet."""
        if not topic:
            return None
        if topic not in self._limits:
            self.read([topic])
        return self._limits[topic]

    def smallest(self) -> int | None:
        """The smallest limit read so far (None: none known)."""
        known = [v for v in self._limits.values() if v is not None]
        return min(known) if known else None

    def batch_size(self, configured: int) -> int:
        """The producer's ``batch.size``: ``configured``, held at the smallest limit known."""
        smallest = self.smallest()
        return configured if smallest is None else max(1, min(configured, smallest))

    def read(self, topics: Iterable[str]) -> None:
        todo = sorted(set(topics) - set(self._limits))
        if not todo:
            return
        try:
            if self._admin is None:
                self._admin = AdminClient({**self.options.producer_config(), "error_cb": self._refusals})
        except KafkaException:  # a setting librdkafka refuses: the producer's error names it
            self._limits.update(dict.fromkeys(todo))
            return
        try:
            found = until_answered(lambda t: self._describe(todo, t), self._admin, self._refusals,
                                   self.options.api_timeout_s, self.options.scrub)
        except KafkaException as e:
            log.warning("jetkafka: cannot read max.message.bytes of topics %s from %s (%s): records over it "
                        "fail in the broker instead of being refused", todo, self.options.bootstrap,
                        self.options.scrub(str(e)))
            found = {}
        self._limits.update({t: found.get(t) for t in todo})

    def _describe(self, topics: list[str], timeout_s: float) -> dict[str, int | None]:
        assert self._admin is not None
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
        futures = self._admin.describe_configs(resources, request_timeout=timeout_s)
        out: dict[str, int | None] = {}
        for resource, future in futures.items():
            try:
                entries = future.result(timeout=timeout_s + 5)
            except KafkaException as e:
                if retriable(e):
                    raise
                error = e.args[0] if e.args else None
                if not (isinstance(error, KafkaError) and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
                    log.warning("jetkafka: cannot read max.message.bytes of topic %r: %s", resource.name,
                                self.options.scrub(str(e)))
                out[resource.name] = None
                continue
            entry = entries.get(LIMIT)
            out[resource.name] = int(entry.value) if entry is not None and entry.value else None
        return out
