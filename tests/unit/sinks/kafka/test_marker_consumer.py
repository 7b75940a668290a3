"""The sink's marker consumer gets every client setting of the producer that librdkafka does
not scope to producers only (security above all), read from librdkafka's own table."""

from __future__ import annotations

from typing import ClassVar

from jetspark.datasources.kafka.scopes import consumer_settings, property_scopes
from jetspark.sinks.kafka import resource
from jetspark.sinks.kafka.options import KafkaSinkOptions
from jetspark.sinks.kafka.rows import KafkaColumns
from jetspark.sinks.transactional import PartitionKey

SECURITY = {
    "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.username": "u",
    "sasl.password": "p", "sasl.oauthbearer.config": "principal=admin", "sasl.oauthbearer.method": "oidc",
    "enable.sasl.oauthbearer.unsecure.jwt": "true", "sasl.oauthbearer.token.endpoint.url": "https://idp/t",
    "ssl.ca.location": "/ca.pem", "ssl.certificate.location": "/c.pem", "ssl.key.location": "/k.pem",
    "ssl.key.password": "kp", "enable.ssl.certificate.verification": "false",
    "ssl.endpoint.identification.algorithm": "none", "https.ca.location": "/idp-ca.pem",
    "client.id": "me", "client.dns.lookup": "use_all_dns_ips", "socket.keepalive.enable": "true",
}
PRODUCER_ONLY = {"linger.ms": "5", "acks": "all", "batch.size": "1000", "compression.type": "lz4",
                 "message.timeout.ms": "1000"}


def test_the_scope_table_is_librdkafkas():
    scopes = property_scopes()
    assert scopes["linger.ms"] == "P" and scopes["isolation.level"] == "C"
    assert all(scopes[k] == "*" for k in SECURITY)


def test_every_setting_but_the_producers_own_stays():
    assert consumer_settings({**SECURITY, **PRODUCER_ONLY, "bootstrap.servers": "b:1"}) == {
        **SECURITY, "bootstrap.servers": "b:1"}


class _Producer:
    def init_transactions(self, timeout: float) -> None:
        pass


class _Consumer:
    configs: ClassVar[list[dict]] = []

    def __init__(self, config: dict) -> None:
        self.configs.append(config)

    def committed(self, tps, timeout: float):
        [tp] = tps
        tp.offset = -1001
        return [tp]


def test_recover_builds_the_marker_consumer_with_the_producers_security(monkeypatch):
    monkeypatch.setattr(resource, "make_producer", lambda *a: _Producer())
    monkeypatch.setattr(resource, "Consumer", _Consumer)
    options = KafkaSinkOptions.parse({"kafka.bootstrap.servers": "b:1", "topic": "t",
                                      **{f"kafka.{k}": v for k, v in {**SECURITY, **PRODUCER_ONLY}.items()}})
    sink = resource.KafkaResource(options, KafkaColumns(False, False, False, False))
    assert sink.recover(PartitionKey("s", 0, 0, 0)) is False
    [config] = _Consumer.configs
    assert {k: config[k] for k in SECURITY} == SECURITY
    assert not set(PRODUCER_ONLY) & set(config)
    assert config["group.id"] == options.transactional_id("s", 0)
