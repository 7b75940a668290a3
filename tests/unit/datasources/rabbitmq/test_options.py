"""jetrabbitmq options: parsed once, validated, errors name option, value and accepted values."""

from __future__ import annotations

import pytest

from jetspark.datasources.kafka.options import KafkaSourceOptions
from jetspark.datasources.rabbitmq.options import RabbitMQOptions
from jetspark.errors import JetsparkError, OptionError

BASE = {"url": "amqp://guest:secret@localhost:5672/%2F", "queue": "q", "walLocation": "/tmp/wal"}


def test_defaults():
    o = RabbitMQOptions.parse(BASE)
    assert (o.queue, o.wal_location, o.prefetch) == ("q", "/tmp/wal", 10_000)
    assert o.max_messages_per_trigger is None
    assert (o.message_id, o.on_missing_message_id, o.event_time, o.watermark.late_records) == (
        "message_id", "fail", "timestamp", "keep")
    # the watermark options and their defaults are jetkafka's (one parser)
    kafka = KafkaSourceOptions.parse({"kafka.bootstrap.servers": "b:9092", "subscribe": "t"}, streaming=True)
    assert o.watermark.policy == kafka.watermark and o.watermark.policy.idle_timeout_ms == 60_000
    assert o.dedup_retention_ms == 24 * 3_600_000
    assert o.batch_limit == 5_000


def test_all_options_case_insensitive():
    o = RabbitMQOptions.parse({
        **BASE, "MAXMESSAGESPERTRIGGER": "500", "prefetch": "800", "messageId": "header:x-id",
        "onMissingMessageId": "HASH", "dedupRetention": "2 hours", "eventTime": "header:ts",
        "watermark.lag": "5 seconds", "watermark.idleTimeout": "1 min", "watermark.lateRecords": "keep",
    })
    assert o.max_messages_per_trigger == 500 and o.prefetch == 800 and o.batch_limit == 500
    assert o.message_id_header == "x-id" and o.event_time_header == "ts"
    assert o.on_missing_message_id == "hash" and o.dedup_retention_ms == 7_200_000
    assert o.watermark.policy.lag_ms == 5_000 and o.watermark.policy.idle_timeout_ms == 60_000
    assert o.watermark.keep_late


def test_max_future_skew_is_off_by_default_and_parsed_as_on_jetkafka():
    assert RabbitMQOptions.parse(BASE).watermark.max_future_skew_ms is None
    skewed = RabbitMQOptions.parse({**BASE, "watermark.maxFutureSkew": "1 hour"})
    assert skewed.watermark.max_future_skew_ms == 3_600_000


def test_prefetch_defaults_to_cover_the_trigger_limit():
    assert RabbitMQOptions.parse({**BASE, "maxMessagesPerTrigger": "20000"}).prefetch == 40_000
    # AMQP's prefetch count is 16 bits: a larger default is capped, a larger batch refused
    assert RabbitMQOptions.parse({**BASE, "maxMessagesPerTrigger": "50000"}).prefetch == 65_535
    default = RabbitMQOptions.parse(BASE)
    assert default.batch_limit == 5_000  # the other half of the window fills during a batch


def test_body_hash_message_id():
    assert RabbitMQOptions.parse({**BASE, "messageId": "bodyhash"}).message_id == "bodyHash"


@pytest.mark.parametrize(
    ("changes", "option", "accepted"),
    [
        ({"url": None}, "url", "required"),
        ({"queue": ""}, "queue", "required"),
        ({"walLocation": None}, "walLocation", "required"),
        ({"url": "http://x"}, "url", "AMQP URI"),
        ({"url": "amqp://guest:secret@localhost:notaport/%2F"}, "url", "AMQP URI pika accepts (Port"),
        ({"url": "amqp://guest:secret@localhost/%2F?heartbeat=abc"}, "url", "Invalid heartbeat value"),
        ({"url": "amqp://localhost/?colour=red"}, "url", "Unknown URL parameter"),
        ({"maxMessagesPerTrigger": "0"}, "maxMessagesPerTrigger", ">= 1"),
        ({"maxMessagesPerTrigger": "200", "prefetch": "100"}, "maxMessagesPerTrigger", "at most prefetch"),
        ({"prefetch": "many"}, "prefetch", "an integer"),
        ({"prefetch": "65536"}, "prefetch", "from 1 to 65535"),
        ({"maxMessagesPerTrigger": "70000"}, "maxMessagesPerTrigger", "at most prefetch (65535)"),
        ({"messageId": "correlation"}, "messageId", "header:<name>"),
        ({"eventTime": "header:"}, "eventTime", "header:<name>"),
        ({"onMissingMessageId": "skip"}, "onMissingMessageId", "fail | hash | drop"),
        ({"dedupRetention": "forever"}, "dedupRetention", "duration"),
        ({"watermark.lateRecords": "flag"}, "watermark.lateRecords", "keep | drop"),
        ({"lateRecords": "keep"}, "lateRecords", "option 'watermark.lateRecords'"),
        ({"watermark.advanceWhenIdle": "true"}, "watermark.advanceWhenIdle", "false (a queue is one"),
        ({"watermark.maxFutureSkew": "tomorrow"}, "watermark.maxFutureSkew", "a duration such as"),
        ({"subscribe": "x"}, "subscribe", "known options"),
        ({"maxMessageSize": "0"}, "maxMessageSize", "at least 1 byte"),
        ({"maxMessageSize": "huge"}, "maxMessageSize", "size"),
    ],
)
def test_bad_options_are_named(changes, option, accepted):
    raw = {k: v for k, v in {**BASE, **changes}.items() if v is not None}
    with pytest.raises(OptionError) as e:
        RabbitMQOptions.parse(raw)
    assert e.value.option.lower() == option.lower()
    assert accepted in e.value.accepted
    assert isinstance(e.value, JetsparkError)
    assert "secret" not in str(e.value)


def test_options_are_frozen_and_url_redacted():
    o = RabbitMQOptions.parse(BASE)
    with pytest.raises(AttributeError):
        o.queue = "other"  # type: ignore[misc]
    assert "secret" not in o.redacted_url() and "guest" in o.redacted_url()


def test_max_message_size_defaults_to_rabbitmq_3s_own_limit():
    assert RabbitMQOptions.parse(BASE).max_message_bytes == 128 << 20
    assert RabbitMQOptions.parse({**BASE, "maxMessageSize": "16 MB"}).max_message_bytes == 16 << 20
