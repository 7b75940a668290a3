"""Options of the ``jetkafkashare`` source, parsed once into a frozen, validated object.

Where an option means what it means on ``jetkafka`` it has jetkafka's name (``kafka.*``,
``subscribe``, ``maxOffsetsPerTrigger``, ``includeHeaders``, ``kafkaConsumer.pollTimeoutMs``,
``maxRecordsPerChunk``), and jetkafka's typed keys and values (``key.*``, ``value.*``,
``schemaRegistry.*``: :mod:`jetspark.datasources.kafka.typed_values`); ``kafka.group.id`` names
the share group and is required."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from jetspark.datasources.kafka.code_settings import refuse_code_settings
from jetspark.datasources.kafka.jaas import translate_jaas
from jetspark.datasources.kafka.retries import without_api_timeout
from jetspark.datasources.kafka.typed_values import COLUMNS as TYPED_COLUMNS
from jetspark.datasources.kafka.typed_values import OPTIONS as TYPED_OPTIONS
from jetspark.datasources.kafka.typed_values import TypedValues
from jetspark.errors import OptionError
from jetspark.options import Options
from jetspark.redaction import redacted_repr
from jetspark.schemas.registry import OPTIONS as REGISTRY_OPTIONS

KNOWN = (
    "subscribe", "maxOffsetsPerTrigger", "includeHeaders", "kafkaConsumer.pollTimeoutMs",
    "maxRecordsPerChunk", "acquireTimeoutMs", "firstAcquireTimeoutMs", "redeliveryWindow",
    *TYPED_OPTIONS, *REGISTRY_OPTIONS,
)
# librdkafka settings the source owns.
_OWNED_KAFKA = {
    "share.acknowledgement.mode": "the source acknowledges explicitly, after Spark's commit",
    "max.poll.records": "use maxOffsetsPerTrigger",
    "enable.auto.commit": "a share group has no offsets to commit",
    "auto.offset.reset": "a share group's start is its share.auto.offset.reset group setting",
}
DEFAULT_MAX_RECORDS = 10_000


@dataclass(frozen=True)
class ShareOptions:
    kafka: Mapping[str, str]
    """librdkafka's settings, credentials among them (the repr masks them); ``group.id`` is the
    share group."""
    topics: tuple[str, ...]
    max_records: int
    """``maxOffsetsPerTrigger``: the most records one micro-batch acquires (one poll)."""
    include_headers: bool
    poll_timeout_ms: int
    """``kafkaConsumer.pollTimeoutMs``: how long a read task waits for a record (as jetkafka)."""
    chunk_rows: int
    acquire_timeout_ms: int
    """``acquireTimeoutMs``: how long the driver's poll waits for records at each trigger."""
    first_acquire_timeout_ms: int
    """``firstAcquireTimeoutMs``: the first poll of a driver waits up to this while the share
    consumer joins the group (no record yet)."""
    redelivery_window_ms: int
    """``redeliveryWindow``: how long the offsets of a committed batch whose ACCEPT is not
    confirmed are kept to recognise their redelivery (more than the group's lock duration)."""
    typed: tuple[TypedValues, ...] = ()
    """``key.format``, ``value.format``: how the read tasks decode those columns (key first)."""

    def __repr__(self) -> str:
        return redacted_repr(self)

    @property
    def kafka_timeout_s(self) -> float:
        """How long the driver waits for the broker's answer to its acknowledgements."""
        return 60.0

    @property
    def group(self) -> str:
        return self.kafka["group.id"]

    @property
    def reader_kafka(self) -> dict[str, str]:
        """The read tasks' settings: plain consumers that assign partitions and never commit,
        under a group id of their own (the share group's id belongs to a share group)."""
        return {**self.kafka, "group.id": f"{self.group}.jetkafkashare-reader"}

    @classmethod
    def parse(cls, raw: Mapping[str, str] | None) -> ShareOptions:
        opts = Options(raw)
        opts.reject_unknown(KNOWN, prefixes=("kafka.",))
        kafka = translate_jaas(opts.with_prefix("kafka."))
        refuse_code_settings(kafka)
        kafka = dict(without_api_timeout(kafka))
        if not kafka.get("bootstrap.servers"):
            raise OptionError("kafka.bootstrap.servers", kafka.get("bootstrap.servers"),
                              "a non-empty host:port list (this option is required)")
        if not kafka.get("group.id"):
            raise OptionError("kafka.group.id", kafka.get("group.id"),
                              "the share group's name (this option is required)")
        for key, why in _OWNED_KAFKA.items():
            if key in kafka:
                raise OptionError(f"kafka.{key}", kafka[key], f"not settable ({why})")
        subscribe = opts.string("subscribe", required=True) or ""
        topics = tuple(t.strip() for t in subscribe.split(",") if t.strip())
        if not topics:
            raise OptionError("subscribe", subscribe, "a comma-separated list of topic names")
        window = opts.duration_ms("redeliveryWindow", 10 * 60_000)
        if window is None or window <= 0:
            raise OptionError("redeliveryWindow", opts.get("redeliveryWindow"),
                              "a positive duration such as '10 minutes' (more than the group's "
                              "lock duration)")
        typed = (TypedValues.parse(opts, topics, column) for column in TYPED_COLUMNS)
        return cls(
            kafka=kafka,
            topics=topics,
            max_records=opts.integer("maxOffsetsPerTrigger", DEFAULT_MAX_RECORDS, minimum=1)
            or DEFAULT_MAX_RECORDS,
            include_headers=opts.boolean("includeHeaders", False),
            poll_timeout_ms=opts.integer("kafkaConsumer.pollTimeoutMs", 120_000, minimum=1) or 120_000,
            chunk_rows=opts.integer("maxRecordsPerChunk", 20_000, minimum=1) or 20_000,
            acquire_timeout_ms=opts.integer("acquireTimeoutMs", 1_000, minimum=1) or 1_000,
            first_acquire_timeout_ms=opts.integer("firstAcquireTimeoutMs", 30_000, minimum=0) or 0,
            redelivery_window_ms=window,
            typed=tuple(t for t in typed if t is not None),
        )
