"""Options of the Kafka sink (``format("jetkafka")`` on ``writeStream``/``write``).

Names mirror Spark's Kafka sink: ``kafka.*`` go to the producer (librdkafka), ``topic`` is
the default topic for rows without a ``topic`` column value. A row without a ``partition``
goes where Spark's sink would put it (``kafka.partitioner`` defaults to ``murmur2_random``, the
Java client's murmur2 hash of the key).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from jetspark.datasources.kafka.code_settings import refuse_code_settings
from jetspark.datasources.kafka.jaas import translate_jaas
from jetspark.datasources.kafka.retries import API_TIMEOUT_MS, api_timeout_ms, without_api_timeout
from jetspark.errors import OptionError
from jetspark.options import SPARK_WRITER_OPTIONS, Options
from jetspark.redaction import scrub_fragments, secret_values
from jetspark.schemas.registry import OPTIONS as REGISTRY_OPTIONS
from jetspark.sinks.guarantees import (
    NONE,
    TASK,
    TWO_PHASE,
    UPSERT,
    Commit,
    Guarantee,
    OnRejected,
    SinkCommits,
    parse_guarantee,
    parse_on_rejected,
    suffixed,
)
from jetspark.sinks.kafka.rows import MAX_TOPIC_LENGTH, TOPIC_ACCEPTED, topic_name_problem
from jetspark.sinks.kafka.typed_values import OPTIONS as TYPED_OPTIONS
from jetspark.sinks.transactional import SINK_ID_ACCEPTED, SINK_ID_RE

#: ``task``: a transactional producer per sink partition commits records and marker
#: (resource.py); ``none``: the idempotent producer, flushed (writer.py).
COMMITS = SinkCommits(
    "jetkafka", (TASK, NONE),
    refused={TWO_PHASE: "Kafka cannot commit a transaction prepared by another process (KIP-939); "
                        "commit=task gives exactly-once with a marker per task",
             UPSERT: "a topic appends, it has no rows to update by key"},
    old_modes={"exactly-once": TASK, "transactional": TASK, "idempotent": NONE, "at-least-once": NONE})

KNOWN = ("topic", "guarantee", "commit", "sinkId", "transactionalIdPrefix", "markerTopic",
         "includeHeaders", "onRejected", "deadLetterTopic", *TYPED_OPTIONS, *REGISTRY_OPTIONS,
         *SPARK_WRITER_OPTIONS)
DEAD_LETTER_SUFFIX = ".rejected"
#: The dead-letter topic of a sink without option ``topic`` (its rows name their topics).
DEFAULT_DEAD_LETTER_TOPIC = "jetspark.rejected"
#: librdkafka's partitioner that places keys as the Java client's default partitioner does.
JAVA_PARTITIONER = "murmur2_random"
# Producer settings the sink owns (Spark's Kafka sink refuses its serializers the same way).
MANAGED = ("transactional.id", "key.serializer", "value.serializer", "enable.idempotence")
_ID_PREFIX_RE = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


@dataclass(frozen=True)
class KafkaSinkOptions:
    """The validated configuration of one Kafka sink. Its repr hides the producer settings."""

    producer: tuple[tuple[str, str], ...] = field(repr=False)
    topic: str | None
    guarantee: Guarantee
    commit: Commit
    sink_id: str | None
    transactional_id_prefix: str
    marker_topic: str | None
    on_rejected: OnRejected
    dead_letter_topic: str
    api_timeout_ms: int = API_TIMEOUT_MS
    """``kafka.default.api.timeout.ms``: how long a call to Kafka is retried while the brokers
    answer with retriable errors (jetspark's setting, not given to the producer)."""

    @property
    def api_timeout_s(self) -> float:
        return self.api_timeout_ms / 1000

    @property
    def transactional(self) -> bool:
        """``commit=task``: a transactional producer per sink partition, with the marker."""
        return self.commit == TASK

    @property
    def bootstrap(self) -> str:
        return dict(self.producer).get("bootstrap.servers", "")

    def producer_config(self) -> dict[str, str]:
        return dict(self.producer)

    def secrets(self) -> tuple[str, ...]:
        return secret_values(self.producer)

    def scrub(self, text: str) -> str:
        """``text`` without any secret producer setting (SASL/SSL passwords, tokens)."""
        return scrub_fragments(text, self.secrets())

    def transactional_id(self, sink_id: str, partition_id: int) -> str:
        """Stable per sink partition: a new attempt or run fences the older producer."""
        return f"{self.transactional_id_prefix}.{sink_id}.{partition_id}"

    @classmethod
    def parse(cls, raw: Mapping[str, str]) -> KafkaSinkOptions:
        opts = Options(raw)
        guarantee, commit = parse_guarantee(opts, COMMITS)  # first: it names the old option 'mode'
        opts.reject_unknown(KNOWN, prefixes=("kafka.",))
        producer = translate_jaas(opts.with_prefix("kafka."))
        refuse_code_settings(producer)
        api_timeout = api_timeout_ms(producer)
        producer = without_api_timeout(producer)
        if not producer.get("bootstrap.servers"):
            raise OptionError("kafka.bootstrap.servers", producer.get("bootstrap.servers"),
                              "host:port[,host:port…] of the Kafka brokers (required)")
        for key in MANAGED:
            if key in producer:
                raise OptionError(f"kafka.{key}", producer[key],
                                  "not settable: the sink sets it from option 'commit' (and 'sinkId')")
        # a keyed record goes where Spark's sink (the Java client) puts it: murmur2 of the key;
        # a null key is spread at random, sticky per batch of records (Java: uniform sticky)
        producer = {**producer, "partitioner": producer.get("partitioner", JAVA_PARTITIONER)}
        # Spark's sink accepts it; as there, a ``headers`` column is written whenever it is present
        opts.boolean("includeHeaders", False)
        sink_id = opts.string("sinkId")
        if sink_id is not None and not SINK_ID_RE.match(sink_id):
            raise OptionError("sinkId", sink_id, SINK_ID_ACCEPTED)
        prefix = opts.string("transactionalIdPrefix", "jetspark")
        assert prefix is not None
        if not _ID_PREFIX_RE.match(prefix):
            raise OptionError("transactionalIdPrefix", prefix, "1 to 100 characters of A-Z a-z 0-9 _ . -")
        topic = opts.string("topic")
        marker_topic = opts.string("markerTopic") or topic
        if commit == TASK and marker_topic is None:
            raise OptionError("markerTopic", None,
                              "an existing topic to keep the sink's commit markers on (offsets of a "
                              "consumer group); required with commit=task (guarantee=exactly-once) "
                              "when option 'topic' is not set")
        for name, value in (("topic", topic), ("markerTopic", marker_topic)):
            if value is not None and topic_name_problem(value):
                raise OptionError(name, value, TOPIC_ACCEPTED)
        dead_letter_topic = opts.string("deadLetterTopic") or (
            suffixed(topic, DEAD_LETTER_SUFFIX, MAX_TOPIC_LENGTH) if topic else DEFAULT_DEAD_LETTER_TOPIC)
        if topic_name_problem(dead_letter_topic) or dead_letter_topic in (topic, marker_topic):
            raise OptionError("deadLetterTopic", dead_letter_topic,
                              f"{TOPIC_ACCEPTED}; a topic other than the sink's topic and marker topic")
        return cls(
            producer=tuple(sorted(producer.items())),
            topic=topic,
            guarantee=guarantee,
            commit=commit,
            sink_id=sink_id,
            transactional_id_prefix=prefix,
            marker_topic=marker_topic,
            on_rejected=parse_on_rejected(opts),
            dead_letter_topic=dead_letter_topic,
            api_timeout_ms=api_timeout,
        )
