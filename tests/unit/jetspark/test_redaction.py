"""The one redaction rule (jetspark/redaction.py) and every place that shows an option's value."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from jetspark.datasources.kafka.broker import validate_consumer_conf
from jetspark.datasources.kafka.options import KafkaSourceOptions
from jetspark.datasources.kafka.source import _settings
from jetspark.datasources.rabbitmq.lease import Lease
from jetspark.datasources.rabbitmq.options import RabbitMQOptions
from jetspark.errors import OptionError
from jetspark.filesystems import open_location
from jetspark.redaction import is_secret_option, redact_dsn, secret_values, shown_value
from jetspark.sinks.jdbc.options import JdbcSinkOptions
from jetspark.sinks.kafka.options import KafkaSinkOptions

CANARY = "Canary9xQz"


@pytest.mark.parametrize("name", [
    "password", "pasword", "passwd", "pwd", "Password", "kafka.sasl.password", "sasl.password",
    "kafka.sasl.jaas.config", "sasl.jaas.config", "kafka.ssl.key.password", "ssl.keystore.password",
    "kafka.ssl.key.pem", "kafka.sasl.oauthbearer.client.secret", "token", "apiKey", "secret_key",
    "access_key", "session_token", "ssl_options", "privateKey", "credentials", "sasl.mechanism",
    "authMechanismProperties", "auth_mechanism_properties",
])
def test_credential_like_names_are_secret(name):
    assert is_secret_option(name)


@pytest.mark.parametrize("name", [
    "url", "walLocation", "queue", "keys", "kafka.key.serializer", "subscribe", "user", "table",
    "bootstrap.servers", "messageId", "sinkId", "eventTime.field", "watermark.delay", "dedupMemory",
    "kafkaConsumer.pollTimeoutMs", "startingOffsetsByTimestampStrategy", "markerTable", "finalColumn",
    "passfile", "passive", "authMechanism",
])
def test_ordinary_names_are_not_secret(name):
    assert not is_secret_option(name)


@pytest.mark.parametrize("dsn, hidden, kept", [
    (f"postgresql://u:{CANARY}@h:5432/db", CANARY, "postgresql://u:***@h:5432/db"),
    (f"postgresql://u:p@{CANARY}@h/db", CANARY, "@h/db"),  # an unencoded @ in the password
    (f"host=h password={CANARY} user=u", CANARY, "host=h password=*** user=u"),
    (f"host=h password='a b {CANARY}' user=u", CANARY, "host=h password=*** user=u"),
    # libpq's \' escape inside a quoted value: the value runs to the unescaped quote
    ("host=h password='it\\'s " + CANARY + "' user=u", CANARY, "host=h password=*** user=u"),
    ("host=h password=it\\'s" + CANARY + " user=u", CANARY, "host=h password=*** user=u"),
    (f"host=h sslpassword={CANARY}", CANARY, "host=h sslpassword=***"),
    (f"postgresql://h/db?password={CANARY}&sslmode=disable", CANARY, "?password=***&sslmode=disable"),
    (f"amqps://u:p@h:5671/%2F?ssl_options={{'keyfile': '/k', 'password': '{CANARY}'}}&heartbeat=5",
     CANARY, "?ssl_options=***&heartbeat=5"),
    (f"s3://AK:{CANARY}@bucket/wal?secret_key={CANARY}&region=eu", CANARY, "&region=eu"),
    # a DSN naming its password file stays usable when pasted (the file holds the secret)
    (f"postgresql://u@h/db?passfile=/run/pg/pass&password={CANARY}", CANARY,
     "?passfile=/run/pg/pass&password=***"),
])
def test_redact_dsn(dsn, hidden, kept):
    shown = redact_dsn(dsn)
    assert hidden not in shown and kept in shown


def test_secret_values_finds_literal_secrets_for_scrubbing():
    found = secret_values({"url": f"postgresql://u:{CANARY}%21@h/db", "kafka.sasl.password": "Other1",
                           "dsn": "password='a\\'b" + CANARY + "'", "queue": "q"})
    assert f"{CANARY}!" in found and "Other1" in found and "a'b" + CANARY in found
    assert "q" not in found


def test_shown_value_masks_malformed_urls_and_secret_names():
    assert CANARY not in str(shown_value("url", f" amqp//u:{CANARY}@h"))
    assert shown_value("kafka.sasl.jaas.config", CANARY) == "***"
    assert shown_value("subscribe", "orders") == "orders"


def test_option_error_never_carries_a_secret_value():
    e = OptionError("kafka.sasl.password", CANARY, "anything")
    assert CANARY not in str(e) and CANARY not in repr(e) and CANARY not in repr(e.value)
    assert "kafka.sasl.password" in str(e)


@pytest.mark.parametrize("parse, raw", [
    (lambda raw: KafkaSourceOptions.parse(raw, streaming=True), {"kafka.bootstrap.servers": "h:9092",
                                                                 "subscribe": "t"}),
    (KafkaSinkOptions.parse, {"kafka.bootstrap.servers": "h:9092", "topic": "t"}),
    (RabbitMQOptions.parse, {"url": "amqp://h", "queue": "q", "walLocation": "/w"}),
    (JdbcSinkOptions.parse, {"url": "postgresql://h/db", "table": "t"}),
])
@pytest.mark.parametrize("unknown", ["pasword", "sasl.password", "colour"])
def test_unknown_options_are_named_without_their_value(parse, raw, unknown):
    with pytest.raises(OptionError) as e:
        parse({**raw, unknown: CANARY})
    assert unknown in str(e.value) and CANARY not in str(e.value) and CANARY not in repr(e.value.value)


@pytest.mark.parametrize("parse, raw, required", [
    (lambda raw: KafkaSourceOptions.parse(raw, streaming=True), {"kafka.bootstrap.servers": "h:9092",
                                                                 "subscribe": "t"}, "subscribe"),
    (KafkaSinkOptions.parse, {"kafka.bootstrap.servers": "h:9092", "topic": "t"}, "topic"),
    (RabbitMQOptions.parse, {"url": "amqp://h", "queue": "q", "walLocation": "/w"}, "walLocation"),
    (JdbcSinkOptions.parse, {"url": "postgresql://h/db", "table": "t"}, "table"),
])
def test_a_misspelt_required_option_is_named_as_unknown(parse, raw, required):
    misspelt = {k if k != required else required[:-1]: v for k, v in raw.items()}
    with pytest.raises(OptionError) as e:
        parse(misspelt)
    assert e.value.option == required[:-1]


@pytest.mark.parametrize("key", ["sasl.jaas.config", "sasl.pasword", "ssl.key.pasword"])
def test_a_setting_librdkafka_rejects_is_named_without_its_value(key):
    conf = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g",
            key: f'org.Foo required password="{CANARY}";'}
    with pytest.raises(OptionError) as e:
        validate_consumer_conf(conf)
    assert CANARY not in str(e.value) and CANARY not in repr(e.value)


def test_librdkafka_text_quoting_a_bad_value_is_scrubbed():
    # librdkafka says "Unsupported SASL mechanism: <value>"
    conf = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "security.protocol": "sasl_plaintext",
            "sasl.mechanism": CANARY}
    with pytest.raises(OptionError) as e:
        validate_consumer_conf(conf)
    assert "SASL mechanism: ***" in str(e.value) and CANARY not in str(e.value)


@pytest.mark.parametrize("url", [f" amqp://u:{CANARY}@h/", f"amqp//u:{CANARY}@h/", f"u:{CANARY}@h"])
def test_a_malformed_rabbitmq_url_is_not_echoed(url):
    with pytest.raises(OptionError) as e:
        RabbitMQOptions.parse({"url": url, "queue": "q", "walLocation": "/w"})
    assert "'url'" in str(e.value) and CANARY not in str(e.value)


def test_option_object_reprs_hide_credentials():
    kafka = KafkaSourceOptions.parse({"kafka.bootstrap.servers": "h:9092", "subscribe": "t",
                                      "kafka.sasl.jaas.config": "org.apache.kafka.common.security.plain."
                                      f'PlainLoginModule required username="u" password="{CANARY}";',
                                      "kafka.sasl.mechanism": "PLAIN", "kafka.ssl.key.password": CANARY},
                                     streaming=True)
    rabbit = RabbitMQOptions.parse({"url": f"amqps://u:{CANARY}@h/%2F?heartbeat=5", "queue": "q",
                                    "walLocation": f"s3://AK:{CANARY}@b/w?secret_key={CANARY}"})
    read_settings = _settings(kafka)  # what every read task of the query is handed
    for options in (kafka, rabbit, read_settings):
        assert CANARY not in repr(options) and CANARY not in str(options)
    assert "h:9092" in repr(kafka) and "queue='q'" in repr(rabbit) and "h:9092" in repr(read_settings)


@pytest.mark.parametrize("url", [
    f"amqps://u:{CANARY}@h/%2F?ssl_options={quote(options)}" for options in (
        CANARY, f"{{'password': '{CANARY}'}}",
        f"{{'ca_certs': '/nonexistent/{CANARY}', 'password': '{CANARY}'}}",
        f"{{'password': '{CANARY}'",  # never closed: a SyntaxError quoting the value
        "['a']")] + [
    f"amqp://guest:Sx1/{CANARY}@h/%2F",  # an unencoded / : pika reads "Sx1" as the port
    f"amqp://guest:{CANARY[:8]}?{CANARY[8:]}@h/%2F",
])
def test_a_url_pika_refuses_is_an_option_error_without_its_secrets(url):
    with pytest.raises(OptionError) as e:
        RabbitMQOptions.parse({"url": url, "queue": "q", "walLocation": "/w"})
    shown = str(e.value)
    assert e.value.option == "url" and CANARY not in shown and "Sx1" not in shown
    assert CANARY[:8] not in shown and CANARY[8:] not in shown


def test_wal_location_uris_with_keys_are_not_shown(tmp_path):
    with pytest.raises(OptionError) as e:
        open_location(f"nosuchfs://AK:{CANARY}@b/w?secret_key={CANARY}")
    assert "walLocation" in str(e.value) and CANARY not in str(e.value)
    lease = Lease(str(tmp_path), 60_000)
    assert lease.shown_location == str(tmp_path)
    assert CANARY not in str(shown_value("walLocation", f"s3://AK:{CANARY}@b/w?session_token={CANARY}"))


# Passwords with a raw space or quote: libpq and psycopg refuse such a URL, quoting the password.
_ODD_PASSWORDS = [f"pa ss{CANARY}", f"it's{CANARY}", f'say "{CANARY}" now', f"a'b {CANARY}\"c"]


@pytest.mark.parametrize("password", _ODD_PASSWORDS)
def test_a_url_password_with_a_raw_space_or_quote_is_masked(password):
    url = f"postgresql://app:{password}@db:5432/x"
    for shown in (redact_dsn(url), redact_dsn(f"connect to {url} failed"), shown_value("url", url)):
        assert CANARY not in shown and "db:5432/x" in shown
    assert password in secret_values({"url": url})


@pytest.mark.parametrize("password", _ODD_PASSWORDS)
def test_a_libpq_password_with_a_raw_space_or_quote_is_masked(password):
    from psycopg.conninfo import make_conninfo

    dsn = make_conninfo("", host="db", user="app", password=password, dbname="x")
    shown = redact_dsn(dsn)
    assert CANARY not in shown and "host=db" in shown and "dbname=x" in shown
    # an unquoted value may hold a quote after its first character (libpq reads it so)
    assert redact_dsn(f"host=db password=x'{CANARY}\" user=app") == "host=db password=*** user=app"


@pytest.mark.parametrize("password", _ODD_PASSWORDS)
def test_jetjdbc_never_shows_an_unencoded_url_password(password):
    import psycopg

    options = JdbcSinkOptions.parse({"url": f"jdbc:postgresql://app:{password}@db:5432/x", "table": "t"})
    assert CANARY not in options.where and "db:5432/x" in options.where
    with pytest.raises(psycopg.Error) as e:  # psycopg quotes the password it cannot parse
        psycopg.connect(options.conninfo, connect_timeout=1)
    assert CANARY not in options.scrub(str(e.value))
    with pytest.raises(OptionError) as bad:
        JdbcSinkOptions.parse({"url": f"mysql://app:{password}@db/x", "table": "t"})
    assert CANARY not in str(bad.value)
