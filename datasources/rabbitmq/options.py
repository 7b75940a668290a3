"""Options of the ``jetrabbitmq`` source, parsed once into a frozen, validated dataclass."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from jetspark.datasources.malformed import ON_MALFORMED
from jetspark.datasources.rabbitmq.endpoint import HOSTNAME_CHECKS, MECHANISMS, TLS_OPTIONS, AmqpEndpoint
from jetspark.datasources.watermark_options import OPTIONS as WATERMARK_OPTIONS
from jetspark.datasources.watermark_options import WatermarkOptions
from jetspark.datasources.watermarks import WatermarkPolicy
from jetspark.errors import OptionError
from jetspark.options import Options
from jetspark.redaction import redact_dsn, redacted_repr, shown_value

MESSAGE_ID_PROPERTY = "message_id"
MESSAGE_ID_BODY_HASH = "bodyHash"
EVENT_TIME_PROPERTY = "timestamp"
HEADER_PREFIX = "header:"

KNOWN = (
    "url",
    "user",
    "password",
    "authMechanism",
    *TLS_OPTIONS,
    "queue",
    "walLocation",
    "maxMessagesPerTrigger",
    "maxBytesPerTrigger",
    "prefetch",
    "bufferMemory",
    "maxMessageSize",
    "messageId",
    "onMissingMessageId",
    "dedupRetention",
    "dedupMemory",
    "eventTime",
    "eventTime.onMalformed",
    *WATERMARK_OPTIONS,
    "pollTimeout",
    "reconnectTimeout",
    "leaseTimeout",
    "path",  # Spark may add it for load(path)
)


MAX_PREFETCH = 65_535
"""AMQP's prefetch count is a 16-bit number: a batch holds at most this many deliveries."""


@dataclass(frozen=True)
class RabbitMQOptions:
    """Validated configuration of one ``jetrabbitmq`` stream (no runtime state)."""

    url: str
    queue: str
    wal_location: str
    max_messages_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    """A batch stops taking messages once their sizes reach this many bytes (at least one message);
    a message's size is its body plus 20 times its header table's wire size (their memory)."""
    prefetch: int = 10_000
    buffer_memory_bytes: int = 256 << 20
    """Message sizes (as ``maxBytesPerTrigger`` counts them) the driver reads ahead at most
    (RabbitMQ ignores AMQP's prefetch-size): past it the consumer stops reading the socket,
    and TCP holds the broker back."""
    max_message_bytes: int = 128 << 20
    """``maxMessageSize``: a message whose body is larger is not read into memory; it is
    rejected without requeue (dead-lettered by the broker where the queue has a dead-letter
    exchange, else dropped) and counted in ``counts.oversizeRejected``."""
    message_id: str = MESSAGE_ID_PROPERTY
    """``message_id`` (AMQP property), ``header:<name>`` or ``bodyHash``."""
    on_missing_message_id: str = "fail"
    """``fail`` | ``hash`` | ``drop`` (drop acks the message and counts it)."""
    dedup_retention_ms: int = 24 * 3_600_000
    dedup_memory_bytes: int = 32 << 20
    """Memory for the dedup store's Bloom filters (see :mod:`.dedup`)."""
    event_time: str = EVENT_TIME_PROPERTY
    """``timestamp`` (AMQP timestamp property) or ``header:<name>``."""
    on_malformed_event_time: str = "null"
    """``eventTime.onMalformed``, jetkafka's words: ``fail`` the query, or ``null`` (the
    receive time stands in, the message is counted in ``counts.malformedEventTime``)."""
    watermark: WatermarkOptions = field(default_factory=lambda: WatermarkOptions(WatermarkPolicy()))
    """The ``watermark.*`` options, as on jetkafka (``advanceWhenIdle`` is refused: see parse)."""
    poll_timeout_ms: int = 50
    reconnect_timeout_ms: int = 60_000
    lease_timeout_ms: int = 60_000
    """How long a lease on ``walLocation`` held from another host lasts without renewal."""
    endpoint: AmqpEndpoint | None = field(default=None, repr=False)
    """``url`` with ``user``, ``password``, ``authMechanism`` and ``ssl.*`` (:mod:`.endpoint`)."""

    def __repr__(self) -> str:  # url and walLocation may carry credentials
        return redacted_repr(self)

    @property
    def message_id_header(self) -> str | None:
        return _header_name(self.message_id)

    @property
    def event_time_header(self) -> str | None:
        return _header_name(self.event_time)

    @property
    def batch_limit(self) -> int:
        """Deliveries taken per trigger when Spark imposes no limit: half the prefetch window
        by default, so the next batch's deliveries arrive while a batch awaits its commit."""
        return self.max_messages_per_trigger or max(1, self.prefetch // 2)

    @classmethod
    def parse(cls, raw: Mapping[str, str] | None) -> RabbitMQOptions:
        o = Options(raw)
        marks = WatermarkOptions.parse(o, can_advance_when_idle=(
            "a queue is one partition and its W moves only with its messages: jetrabbitmq has no "
            "heartbeat batches to carry a W that advances without them"))
        o.reject_unknown(KNOWN)  # before the required ones: a misspelt option is named as unknown
        url = o.string("url", required=True)
        if not url.startswith(("amqp://", "amqps://")):
            raise OptionError("url", url, "an AMQP URI such as amqp://user:pass@host:5672/%2F")
        queue = o.string("queue", required=True)
        wal = o.string("walLocation", required=True)
        max_msgs = o.integer("maxMessagesPerTrigger", None, minimum=1)
        prefetch = o.integer("prefetch", None, minimum=1, maximum=MAX_PREFETCH)
        if prefetch is None:  # room for the next batch while one waits for its commit
            prefetch = min(MAX_PREFETCH, max(10_000, 2 * (max_msgs or 0)))
        if max_msgs is not None and max_msgs > prefetch:
            raise OptionError(
                "maxMessagesPerTrigger", max_msgs,
                f"at most prefetch ({prefetch}): a batch can only hold prefetched deliveries",
            )
        message_id = _id_choice(
            o, "messageId", MESSAGE_ID_PROPERTY, (MESSAGE_ID_PROPERTY, MESSAGE_ID_BODY_HASH)
        )
        event_time = _id_choice(o, "eventTime", EVENT_TIME_PROPERTY, (EVENT_TIME_PROPERTY,))
        parsed = cls(
            url=url,
            queue=queue,
            wal_location=wal,
            max_messages_per_trigger=max_msgs,
            max_bytes_per_trigger=o.size_bytes("maxBytesPerTrigger", None),  # type: ignore[arg-type]
            prefetch=prefetch,
            buffer_memory_bytes=o.size_bytes("bufferMemory", cls.buffer_memory_bytes),
            max_message_bytes=o.size_bytes("maxMessageSize", cls.max_message_bytes),
            message_id=message_id,
            on_missing_message_id=o.choice("onMissingMessageId", "fail", ("fail", "hash", "drop")),
            dedup_retention_ms=o.duration_ms("dedupRetention", cls.dedup_retention_ms),
            dedup_memory_bytes=o.size_bytes("dedupMemory", cls.dedup_memory_bytes),
            event_time=event_time,
            on_malformed_event_time=o.choice("eventTime.onMalformed", "null", ON_MALFORMED),
            watermark=marks,
            poll_timeout_ms=o.duration_ms("pollTimeout", cls.poll_timeout_ms),
            reconnect_timeout_ms=o.duration_ms("reconnectTimeout", cls.reconnect_timeout_ms),
            lease_timeout_ms=o.duration_ms("leaseTimeout", cls.lease_timeout_ms),
            endpoint=AmqpEndpoint(
                url, user=o.string("user"), password=o.get("password"),
                mechanism=o.choice("authMechanism", "PLAIN", MECHANISMS),
                ca_location=o.string("ssl.ca.location"),
                certificate_location=o.string("ssl.certificate.location"),
                key_location=o.string("ssl.key.location"), key_password=o.get("ssl.key.password"),
                check_hostname=o.choice("ssl.endpoint.identification.algorithm", "https",
                                        HOSTNAME_CHECKS) == "https"),
        )
        if parsed.max_bytes_per_trigger is not None and parsed.max_bytes_per_trigger < 1:
            raise OptionError("maxBytesPerTrigger", o.get("maxBytesPerTrigger"), "a size of at least 1 byte")
        if parsed.buffer_memory_bytes < 1 << 20:
            raise OptionError("bufferMemory", o.get("bufferMemory"), "a size of at least 1 MB")
        if parsed.max_message_bytes < 1:
            raise OptionError("maxMessageSize", o.get("maxMessageSize"), "a size of at least 1 byte")
        if parsed.dedup_memory_bytes < 1 << 20:
            raise OptionError("dedupMemory", o.get("dedupMemory"), "a size of at least 1 MB")
        if parsed.lease_timeout_ms < 1_000:
            raise OptionError("leaseTimeout", o.get("leaseTimeout"), "a duration of at least 1 second")
        return parsed

    @property
    def connect_to(self) -> AmqpEndpoint:
        return self.endpoint or AmqpEndpoint(self.url)

    def redacted_url(self) -> str:
        """The URL without its password, for messages and logs."""
        return redact_dsn(self.url)

    def shown_wal_location(self) -> str:
        """``walLocation`` without any key it carries, for messages and logs."""
        return str(shown_value("walLocation", self.wal_location))


def _header_name(value: str) -> str | None:
    return value[len(HEADER_PREFIX):] if value.lower().startswith(HEADER_PREFIX) else None


def _id_choice(o: Options, name: str, default: str, fixed: tuple[str, ...]) -> str:
    value = o.string(name, default)
    for choice in fixed:
        if value.lower() == choice.lower():
            return choice
    if value.lower().startswith(HEADER_PREFIX) and len(value) > len(HEADER_PREFIX):
        return HEADER_PREFIX + value[len(HEADER_PREFIX):]
    raise OptionError(name, value, " | ".join((*fixed, "header:<name>")))
