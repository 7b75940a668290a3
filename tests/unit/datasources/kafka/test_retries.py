"""The one retry policy of jetkafka's calls to Kafka: retriable errors are asked again with a
back-off until the deadline (``kafka.default.api.timeout.ms``); others are raised at once."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from jetspark.datasources.kafka import retries
from jetspark.datasources.kafka.options import KafkaSourceOptions
from jetspark.datasources.kafka.refusals import Refusals
from jetspark.datasources.kafka.retries import api_timeout_ms, retriable, until_answered
from jetspark.errors import OptionError
from jetspark.sinks.kafka.options import KafkaSinkOptions


class _Answers:
    """Fails with each of ``errors`` in turn, then answers."""

    def __init__(self, *errors: KafkaError) -> None:
        self.errors, self.calls = list(errors), 0

    def __call__(self, timeout_s: float) -> str:
        self.calls += 1
        if self.errors:
            raise KafkaException(self.errors.pop(0))
        return "answer"

    def poll(self, timeout: float) -> int:
        return 0


@pytest.fixture
def sleeps(monkeypatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(retries.time, "sleep", slept.append)
    return slept


def _wait(call: _Answers, timeout_s: float = 60) -> str:
    return until_answered(call, call, Refusals(), timeout_s, str)


def test_a_restarted_brokers_answers_are_waited_out_with_a_growing_back_off(sleeps):
    """What a broker answers while it loads its partitions after a restart: not flagged
    retriable by librdkafka per partition, retried all the same."""
    codes = (KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.NOT_LEADER_FOR_PARTITION,
             KafkaError.LEADER_NOT_AVAILABLE, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError._NOENT,
             KafkaError.UNKNOWN_LEADER_EPOCH)
    moving = [KafkaError(code) for code in codes]
    assert not moving[0].retriable()
    call = _Answers(*moving)
    assert _wait(call) == "answer" and call.calls == 7
    assert sleeps == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


@pytest.mark.parametrize("error", [KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED),
                                   KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART),
                                   KafkaError(KafkaError._INVALID_ARG),
                                   KafkaError(KafkaError.UNKNOWN_LEADER_EPOCH, txn_requires_abort=True),
                                   KafkaError(KafkaError._TRANSPORT, fatal=True)])
def test_other_errors_are_raised_at_once(sleeps, error):
    call = _Answers(error)
    with pytest.raises(KafkaException):
        _wait(call)
    assert call.calls == 1 and sleeps == [] and not retriable(error)


def test_at_the_deadline_the_last_error_is_raised(sleeps):
    call = _Answers(*[KafkaError(KafkaError.UNKNOWN_LEADER_EPOCH)] * 3)
    with pytest.raises(KafkaException) as e:
        _wait(call, timeout_s=0)
    assert call.calls == 1 and e.value.args[0].code() == KafkaError.UNKNOWN_LEADER_EPOCH


def test_the_deadline_is_kafka_default_api_timeout_ms_on_source_and_sink():
    assert api_timeout_ms({}) == 60_000 and api_timeout_ms({"default.api.timeout.ms": "5000"}) == 5000
    source = KafkaSourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "t",
                                       "kafka.default.api.timeout.ms": "5000"}, streaming=True)
    assert source.api_timeout_ms == 5000 and "default.api.timeout.ms" not in source.kafka  # not librdkafka's
    sink = KafkaSinkOptions.parse({"kafka.bootstrap.servers": "h:1", "topic": "t",
                                   "kafka.default.api.timeout.ms": "7000"})
    assert sink.api_timeout_ms == 7000 and "default.api.timeout.ms" not in sink.producer_config()
    for bad in ("-1", "soon"):
        with pytest.raises(OptionError) as e:
            KafkaSinkOptions.parse({"kafka.bootstrap.servers": "h:1", "topic": "t",
                                    "kafka.default.api.timeout.ms": bad})
        assert e.value.option == "kafka.default.api.timeout.ms" and "integer >= 0" in str(e.value)
