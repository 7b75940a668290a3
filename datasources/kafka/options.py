"""Options of the ``jetkafka`` source, parsed once into a frozen, validated object.

Names and meanings follow Spark's built-in ``kafka`` source, so ``format("kafka")`` →
``format("jetkafka")`` keeps working for the common options; ``watermark.*`` are ours.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from jetspark.datasources.kafka.code_settings import refuse_code_settings
from jetspark.datasources.kafka.event_time import EventTimeSpec, parse_on_malformed
from jetspark.datasources.kafka.jaas import translate_jaas
from jetspark.datasources.kafka.retries import api_timeout_ms, without_api_timeout
from jetspark.datasources.kafka.typed_values import OPTIONS as TYPED_OPTIONS
from jetspark.datasources.kafka.typed_values import TypedValues, subscribed_topics
from jetspark.datasources.watermark_options import OPTIONS as WATERMARK_OPTIONS
from jetspark.datasources.watermark_options import WatermarkOptions, asks_for_event_time
from jetspark.datasources.watermarks import WatermarkPolicy
from jetspark.errors import OptionError
from jetspark.options import Options
from jetspark.redaction import redacted_repr
from jetspark.schemas.registry import OPTIONS as REGISTRY_OPTIONS

EARLIEST = -2
LATEST = -1

KNOWN = (
    "subscribe", "subscribePattern", "assign",
    "startingOffsets", "startingOffsetsByTimestamp", "startingTimestamp",
    "startingOffsetsByTimestampStrategy", "endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp",
    "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
    "failOnDataLoss", "includeHeaders", "minPartitions", "maxRecordsPerPartition", "groupIdPrefix",
    "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
    "maxRecordsPerChunk", "commitOffsetsToGroup",
    *WATERMARK_OPTIONS,
    "watermark.maxTimestampFrom", "eventTime.field", "eventTime.format", "eventTime.onMalformed",
    *TYPED_OPTIONS, *REGISTRY_OPTIONS,
)
# librdkafka settings the source owns (Spark's Kafka source rejects the same ones).
_OWNED_KAFKA = {
    "enable.auto.commit": "offsets live in the checkpoint; commitOffsetsToGroup commits them for lag tools",
    "auto.offset.reset": "use startingOffsets",
    "enable.partition.eof": "the source manages it",
}
_OFFSETS_JSON = 'earliest, latest, or JSON such as {"topic":{"0":23,"1":-2}} (-2 earliest, -1 latest)'


@dataclass(frozen=True)
class Subscription:
    """Exactly one of: a topic list, a topic regex, or fixed topic-partitions."""

    kind: str  # "subscribe" | "subscribePattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or end: ``earliest``/``latest`` globally, or per partition.

    ``per_partition`` maps (topic, partition) to an offset (-2 earliest, -1 latest) or,
    when ``by_timestamp``, to an epoch-ms timestamp; ``timestamp`` applies to all.
    """

    default: int = LATEST
    per_partition: Mapping[tuple[str, int], int] = field(default_factory=dict)
    by_timestamp: bool = False
    timestamp: int | None = None


@dataclass(frozen=True)
class KafkaSourceOptions:
    kafka: Mapping[str, str]
    """librdkafka configuration (the ``kafka.`` options, prefix stripped), group id included."""
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    timestamp_strategy: str
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    fail_on_data_loss: bool
    include_headers: bool
    min_partitions: int | None
    poll_timeout_ms: int
    chunk_rows: int
    watermark: WatermarkPolicy
    keep_late: bool
    max_ts_from: str  # "auto" | "scan"
    heartbeats: bool = False
    """``watermark.heartbeats``: a batch whose W moved without records carries it in one row."""
    marks: bool = True
    """Rows carry ``watermark``, ``heartbeat``, ``late``: the query asks for event time
    (:func:`.watermark_options.asks_for_event_time`); else a plain read's columns are Spark's."""
    event_time: EventTimeSpec | None = None
    """Event time from a JSON field of the value; None: the Kafka record timestamp."""
    max_future_skew_ms: int | None = None
    """``watermark.maxFutureSkew``: event times later than the planning driver's clock plus this
    follow ``on_malformed`` instead of moving the watermark (None: no cut-off)."""
    on_malformed: str = "fail"
    """``eventTime.onMalformed``: what a record with a malformed or too-future event time gets."""
    commit_offsets_to_group: bool = False
    """Commit each batch's end offsets to ``kafka.group.id`` for lag tools (never read back)."""
    max_records_per_partition: int | None = None
    """Split a partition's range into tasks of at most this many offsets (Spark's option)."""
    fetch_offset_retries: int = 3
    """How often the driver retries a failed offset listing (Spark's ``fetchOffset.numRetries``)."""
    fetch_offset_retry_interval_ms: int = 10
    api_timeout_ms: int = 60_000
    """``kafka.default.api.timeout.ms``: how long a call to Kafka is retried while the brokers answer
    with retriable errors (:mod:`.retries`); not a librdkafka setting, so not in ``kafka``."""
    typed_values: TypedValues | None = None
    """``value.format`` avro or json-schema: how ``value`` is decoded (None: Spark's binary column)."""
    typed_keys: TypedValues | None = None
    """``key.format``: how ``key`` is decoded (None: Spark's binary column)."""

    @property
    def typed(self) -> tuple[TypedValues, ...]:
        """The typed columns, key first: the order their error columns follow the others."""
        return tuple(t for t in (self.typed_keys, self.typed_values) if t is not None)

    def __repr__(self) -> str:  # the librdkafka settings may hold credentials
        return redacted_repr(self)

    @classmethod
    def parse(cls, raw: Mapping[str, str] | None, *, streaming: bool) -> KafkaSourceOptions:
        opts = Options(raw)
        opts.reject_unknown(KNOWN, prefixes=("kafka.",))  # first: no credential file read for a refused one
        kafka = translate_jaas(opts.with_prefix("kafka."))
        refuse_code_settings(kafka)
        api_timeout = api_timeout_ms(kafka)
        kafka = without_api_timeout(kafka)
        if not kafka.get("bootstrap.servers"):
            raise OptionError("kafka.bootstrap.servers", kafka.get("bootstrap.servers"),
                              "a non-empty host:port list (this option is required)")
        for key, why in _OWNED_KAFKA.items():
            if key in kafka:
                raise OptionError(f"kafka.{key}", kafka[key], f"not settable ({why})")
        group_prefix = opts.string("groupIdPrefix", "jetkafka")
        commit_to_group = _commit_offsets_to_group(opts, "group.id" in kafka, streaming)
        kafka = dict(kafka)
        kafka.setdefault("group.id", f"{group_prefix}-{uuid.uuid4().hex[:12]}")
        subscription = _subscription(opts)
        starting = _offsets(opts, "startingOffsets", LATEST if streaming else EARLIEST)
        starting = _by_timestamp(opts, "startingTimestamp", "startingOffsetsByTimestamp", starting)
        ending = _offsets(opts, "endingOffsets", LATEST)
        ending = _by_timestamp(opts, "endingTimestamp", "endingOffsetsByTimestamp", ending)
        if streaming:
            for name in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"):
                if opts.get(name) is not None:
                    raise OptionError(name, opts.get(name), "nothing in a streaming query (batch reads only)")
        elif starting.default == LATEST and not starting.by_timestamp and not starting.per_partition:
            raise OptionError("startingOffsets", "latest", "earliest or JSON offsets for batch reads")
        ends_earliest = ending.default == EARLIEST or EARLIEST in ending.per_partition.values()
        if not streaming and ends_earliest and not ending.by_timestamp:
            raise OptionError("endingOffsets", opts.get("endingOffsets"),
                              "latest or JSON offsets without -2 (earliest) for batch reads")
        max_per_trigger = opts.integer("maxOffsetsPerTrigger", None, minimum=1)
        min_per_trigger = opts.integer("minOffsetsPerTrigger", None, minimum=1)
        if max_per_trigger is not None and min_per_trigger is not None and min_per_trigger > max_per_trigger:
            raise OptionError("minOffsetsPerTrigger", min_per_trigger,
                              f"an integer <= maxOffsetsPerTrigger ({max_per_trigger})")
        marks = WatermarkOptions.parse(opts)
        typed = TypedValues.parse(opts, subscribed_topics(opts))
        typed_keys = TypedValues.parse(opts, subscribed_topics(opts), "key")
        event_time = EventTimeSpec.parse(opts, future_cutoff=marks.max_future_skew_ms is not None)
        if event_time is not None and typed is not None:  # a field of the decoded value
            event_time = event_time.on_typed(typed)
        return cls(
            kafka=kafka,
            subscription=subscription,
            starting=starting,
            ending=ending,
            timestamp_strategy=opts.choice("startingOffsetsByTimestampStrategy", "error",
                                           ["error", "latest"]),
            max_offsets_per_trigger=max_per_trigger,
            min_offsets_per_trigger=min_per_trigger,
            max_trigger_delay_ms=opts.duration_ms("maxTriggerDelay", 15 * 60_000) or 0,
            fail_on_data_loss=opts.boolean("failOnDataLoss", True),
            include_headers=opts.boolean("includeHeaders", False),
            min_partitions=opts.integer("minPartitions", None, minimum=1),
            poll_timeout_ms=opts.integer("kafkaConsumer.pollTimeoutMs", 120_000, minimum=1) or 120_000,
            chunk_rows=opts.integer("maxRecordsPerChunk", 20_000, minimum=1) or 20_000,
            watermark=marks.policy,
            keep_late=marks.keep_late,
            heartbeats=marks.heartbeats,
            marks=asks_for_event_time(opts),
            max_ts_from=opts.choice("watermark.maxTimestampFrom", "auto", ["auto", "scan"]),
            event_time=event_time,
            max_future_skew_ms=marks.max_future_skew_ms,
            on_malformed=parse_on_malformed(opts),
            commit_offsets_to_group=commit_to_group,
            max_records_per_partition=opts.integer("maxRecordsPerPartition", None, minimum=1),
            fetch_offset_retries=opts.integer("fetchOffset.numRetries", 3, minimum=0) or 0,
            fetch_offset_retry_interval_ms=opts.integer("fetchOffset.retryIntervalMs", 10, minimum=0) or 0,
            api_timeout_ms=api_timeout,
            typed_values=typed,
            typed_keys=typed_keys,
        )

    @property
    def max_ts_from_broker(self) -> bool:
        """The driver may learn maxTs from ListOffsets (Kafka timestamps are the event times)."""
        return self.max_ts_from == "auto" and self.event_time is None

    @property
    def isolation_committed(self) -> bool:
        """librdkafka reads committed data only unless ``kafka.isolation.level`` says otherwise."""
        return self.kafka.get("isolation.level", "read_committed") == "read_committed"


def _commit_offsets_to_group(opts: Options, has_group_id: bool, streaming: bool) -> bool:
    """``commitOffsetsToGroup``: only with a group the user named, only in a streaming query."""
    wanted = opts.boolean("commitOffsetsToGroup", False)
    if wanted and not has_group_id:
        raise OptionError("commitOffsetsToGroup", opts.get("commitOffsetsToGroup"),
                          "true only together with kafka.group.id (the consumer group to commit to), "
                          "else false")
    if wanted and not streaming:
        raise OptionError("commitOffsetsToGroup", opts.get("commitOffsetsToGroup"),
                          "false in a batch read (streaming queries only)")
    return wanted


def _subscription(opts: Options) -> Subscription:
    given = {name: opts.string(name) for name in ("subscribe", "subscribePattern", "assign")}
    present = [name for name, value in given.items() if value is not None]
    if len(present) != 1:
        raise OptionError("subscribe | subscribePattern | assign",
                          {k: v for k, v in given.items() if v is not None} or None,
                          "exactly one of the three")
    name = present[0]
    value = given[name]
    assert value is not None
    if name == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError(name, value, "a comma-separated list of topic names")
        return Subscription(name, topics=topics)
    if name == "subscribePattern":
        try:
            re.compile(value)
        except re.error as e:
            raise OptionError(name, value, f"a regular expression ({e})") from None
        return Subscription(name, pattern=value)
    accepted = 'JSON such as {"topicA":[0,1],"topicB":[2,4]}'
    try:
        parsed = json.loads(value)
        pairs = tuple(sorted((str(t), int(p)) for t, ps in parsed.items() for p in ps))
    except (ValueError, TypeError, AttributeError):
        raise OptionError(name, value, accepted) from None
    if not pairs or any(p < 0 for _, p in pairs):
        raise OptionError(name, value, accepted)
    return Subscription(name, assigned=pairs)


def _offsets(opts: Options, name: str, default: int) -> OffsetSpec:
    value = opts.string(name)
    if value is None:
        return OffsetSpec(default)
    low = value.strip().lower()
    if low in ("earliest", "latest"):
        return OffsetSpec(EARLIEST if low == "earliest" else LATEST)
    per = _partition_json(name, value, _OFFSETS_JSON)
    if any(o < EARLIEST for o in per.values()):
        raise OptionError(name, value, _OFFSETS_JSON)
    return OffsetSpec(default, per)


def _by_timestamp(opts: Options, global_name: str, json_name: str, fallback: OffsetSpec) -> OffsetSpec:
    """Spark's precedence: a global timestamp, then per-partition timestamps, then offsets."""
    global_ts = opts.integer(global_name, None, minimum=0)
    if global_ts is not None:
        return OffsetSpec(fallback.default, {}, True, global_ts)
    value = opts.string(json_name)
    if value is None:
        return fallback
    accepted = 'JSON such as {"topic":{"0":1700000000000}} (epoch milliseconds)'
    per = _partition_json(json_name, value, accepted)
    if any(ts < 0 for ts in per.values()):
        raise OptionError(json_name, value, accepted)
    return OffsetSpec(fallback.default, per, True, None)


def _partition_json(name: str, value: str, accepted: str) -> dict[tuple[str, int], int]:
    try:
        parsed = json.loads(value)
        return {(str(t), int(p)): int(o) for t, parts in parsed.items() for p, o in parts.items()}
    except (ValueError, TypeError, AttributeError):
        raise OptionError(name, value, accepted) from None
