"""The queue source's connection settings: credentials and TLS as options, checked at parse."""

from __future__ import annotations

import pika
import pytest
import trustme

from jetspark.datasources.rabbitmq.options import RabbitMQOptions
from jetspark.errors import OptionError

BASE = {"queue": "q", "walLocation": "/tmp/wal"}


def _parse(url: str, **options: str) -> RabbitMQOptions:
    return RabbitMQOptions.parse({"url": url, **BASE, **options})


def test_user_and_password_options_replace_the_urls_and_stay_hidden():
    o = _parse("amqp://guest:guest@h:5672/%2F", user="u", password="c4n4ry")
    creds = o.connect_to.parameters().credentials
    assert (creds.username, creds.password) == ("u", "c4n4ry")
    assert "c4n4ry" not in repr(o) and "c4n4ry" not in repr(o.connect_to)


def test_the_urls_password_is_not_in_the_endpoints_repr():
    endpoint = _parse("amqp://u:S3cretInUrl@h/%2F").connect_to
    assert "S3cretInUrl" not in repr(endpoint) and "h/%2F" in repr(endpoint)


def test_a_password_alone_keeps_the_urls_user():
    creds = _parse("amqp://alice:old@h/%2F", password="pw").connect_to.parameters().credentials
    assert (creds.username, creds.password) == ("alice", "pw")


@pytest.fixture(scope="module")
def pems(tmp_path_factory):
    d = tmp_path_factory.mktemp("pems")
    ca = trustme.CA()
    cert = ca.issue_cert("client.test", common_name="jetspark")
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    cert.cert_chain_pems[0].write_to_path(str(d / "c.pem"))
    cert.private_key_pem.write_to_path(str(d / "c.key"))
    return d


def test_tls_files_build_a_verifying_context(pems):
    o = _parse("amqps://h:5671/%2F", **{"ssl.ca.location": str(pems / "ca.pem"),
                                        "ssl.certificate.location": str(pems / "c.pem"),
                                        "ssl.key.location": str(pems / "c.key"), "authMechanism": "external"})
    params = o.connect_to.parameters()
    assert isinstance(params.ssl_options, pika.SSLOptions)
    assert params.ssl_options.context.check_hostname
    assert o.connect_to.mechanism == "EXTERNAL"


@pytest.mark.parametrize("url, options, names", [
    ("amqp://h/%2F", {"ssl.ca.location": "CA"}, "amqps://"),
    ("amqp://h/%2F", {"authMechanism": "EXTERNAL"}, "amqps://"),
    ("amqps://h/%2F", {"authMechanism": "EXTERNAL"}, "ssl.certificate.location"),
    ("amqps://h/%2F", {"authMechanism": "GSSAPI"}, "PLAIN | EXTERNAL"),
    ("amqps://h/%2F", {"ssl.certificate.location": "C"}, "ssl.key.location"),
    ("amqps://h/%2F", {"ssl.ca.location": "/nonexistent/ca.pem"}, "ssl.ca.location"),
    ("amqps://h/%2F", {"ssl.endpoint.identification.algorithm": "dns"}, "https | none"),
])
def test_misconfigurations_fail_at_parse_naming_the_option(url, options, names, pems):
    options = {k: str(pems / "ca.pem") if v == "CA" else v for k, v in options.items()}
    with pytest.raises(OptionError) as err:
        _parse(url, **options)
    assert names in str(err.value)


def test_a_key_that_does_not_match_is_named(pems):
    other = trustme.CA().issue_cert("x.test")
    other.private_key_pem.write_to_path(str(pems / "other.key"))
    with pytest.raises(OptionError) as err:
        _parse("amqps://h/%2F", **{"ssl.certificate.location": str(pems / "c.pem"),
                                   "ssl.key.location": str(pems / "other.key")})
    assert "ssl.certificate.location" in str(err.value)
