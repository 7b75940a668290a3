"""kafka.sasl.jaas.config (Spark's JAAS line) becomes librdkafka's sasl.username and sasl.password."""

from __future__ import annotations

import pytest

from jetspark.datasources.kafka.broker import validate_consumer_conf
from jetspark.datasources.kafka.jaas import translate_jaas
from jetspark.datasources.kafka.options import KafkaSourceOptions
from jetspark.errors import OptionError
from jetspark.sinks.kafka.options import KafkaSinkOptions

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
SECRET = "s3cr#t-Pa55"
SOURCE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}
SINK = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t"}


def jaas(module: str = SCRAM, password: str = SECRET) -> str:
    return f'{module} required username="alice" password="{password}";'


def test_the_source_and_the_sink_get_username_and_password():
    raw = {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
           "kafka.sasl.jaas.config": jaas()}
    for kafka in (KafkaSourceOptions.parse({**SOURCE, **raw}, streaming=True).kafka,
                  KafkaSinkOptions.parse({**SINK, **raw}).producer_config()):
        assert "sasl.jaas.config" not in kafka
        assert (kafka["sasl.username"], kafka["sasl.password"]) == ("alice", SECRET)
        assert kafka["sasl.mechanism"] == "SCRAM-SHA-512"
    # librdkafka takes the translation
    validate_consumer_conf(KafkaSourceOptions.parse({**SOURCE, **raw}, streaming=True).kafka)


def test_plain_quotes_and_unquoted_values():
    got = translate_jaas({"sasl.mechanism": "PLAIN",
                          "sasl.jaas.config": f'{PLAIN}  required\n username=bob password="a \\"b\\" ;c" ;'})
    assert got == {"sasl.mechanism": "PLAIN", "sasl.username": "bob", "sasl.password": 'a "b" ;c'}
    assert translate_jaas({"x": "1"}) == {"x": "1"}


@pytest.mark.parametrize("line", [
    jaas("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"),
    jaas("com.sun.security.auth.module.Krb5LoginModule"),
    jaas().replace("required", "mandatory"),
    jaas().rstrip(";"),
    jaas().replace(";", f' tokenauth="true" other="{SECRET}";'),
    f'{SCRAM} required password="{SECRET}";',
    jaas() + jaas(),
    SECRET,
])
def test_other_lines_are_refused_without_the_password(line):
    with pytest.raises(OptionError) as err:
        translate_jaas({"sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": line})
    assert err.value.option == "kafka.sasl.jaas.config"
    assert PLAIN in err.value.accepted and SCRAM in err.value.accepted
    for text in (str(err.value), repr(err.value), repr(err.value.value), err.value.accepted):
        assert SECRET not in text and "alice" not in text


def test_the_mechanism_must_be_the_modules():
    for mechanism in (None, "PLAIN", "GSSAPI"):
        kafka = {"sasl.jaas.config": jaas()} | ({"sasl.mechanism": mechanism} if mechanism else {})
        with pytest.raises(OptionError) as err:
            translate_jaas(kafka)
        assert err.value.option == "kafka.sasl.mechanism" and "SCRAM-SHA-512" in err.value.accepted
        assert SECRET not in str(err.value)
    got = translate_jaas({"sasl.mechanisms": "PLAIN", "sasl.jaas.config": jaas(PLAIN)})
    assert got["sasl.password"] == SECRET


def test_explicit_credentials_and_a_jaas_line_are_refused_together():
    with pytest.raises(OptionError) as err:
        KafkaSinkOptions.parse({**SINK, "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.password": SECRET,
                                "kafka.sasl.jaas.config": jaas(PLAIN)})
    assert err.value.option == "kafka.sasl.jaas.config" and "kafka.sasl.password" in err.value.accepted
    assert SECRET not in str(err.value)
