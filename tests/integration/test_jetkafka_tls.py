"""jetkafka source and sink against a broker with TLS: SASL_SSL with SCRAM-SHA-512 (Spark's
``kafka.sasl.jaas.config``, and the password from a file) and mTLS (a client certificate),
the broker's certificate verified; and the ways it must fail — a wrong password, an untrusted
CA, a broker reached by a name its certificate does not carry — each with a clear error,
nothing written, the secret shown nowhere.

One broker for the module, started here with a CA and certificates the test makes; its
plain listener serves the test's own checks."""

from __future__ import annotations

import secrets
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from jetspark.devtools.services import kafka
from jetspark.devtools.services.process import stop
from jetspark.devtools.services.security import Login, ServerTls
from tests.integration.scripts.sink_kafka_read import read_topic

pytestmark = pytest.mark.integration

USER = "jetspark"
N = 50


@pytest.fixture(scope="module")
def broker() -> Iterator[dict]:
    d = Path(tempfile.mkdtemp(prefix="jetspark-tls-kafka-"))
    ca, other_ca = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1")  # not localhost: that name is the mismatch case
    client = ca.issue_cert("client.jetspark.test", common_name=USER)
    for name, pem in (("ca.pem", ca.cert_pem), ("other-ca.pem", other_ca.cert_pem),
                      ("server.pem", server.cert_chain_pems[0]), ("server.key", server.private_key_pem),
                      ("client.pem", client.cert_chain_pems[0]), ("client.key", client.private_key_pem)):
        pem.write_to_path(str(d / name))
    password = secrets.token_hex(12)
    (d / "password").write_text(password + "\n")
    record = kafka.start(d / "node", tls=ServerTls(d / "ca.pem", d / "server.pem", d / "server.key"),
                         scram=Login(USER, password))
    try:
        yield {"plain": record.endpoint, "sasl_ssl": f"127.0.0.1:{record.ports['sasl_ssl']}",
               "ssl": f"127.0.0.1:{record.ports['ssl']}", "dir": d, "password": password}
    finally:
        for proc in record.processes:
            stop(proc)
        shutil.rmtree(d, ignore_errors=True)


def _topic(broker: dict, records: int = 0) -> str:
    name = f"tls_{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker["plain"]})
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(30)
    if records:
        producer = Producer({"bootstrap.servers": broker["plain"]})
        for i in range(records):
            producer.produce(name, key=f"k{i}", value=f"v{i}", partition=i % 2)
        assert producer.flush(30) == 0
    return name


def _values(broker: dict, topic: str) -> list[str]:
    """The committed values of ``topic`` (read over the plain listener)."""
    return sorted(v.decode() for _, v, _, _ in read_topic(broker["plain"], topic) if v is not None)


def _scram(broker: dict, **extra: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": broker["sasl_ssl"], "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.ssl.ca.location": str(broker["dir"] / "ca.pem"),
            **extra}


def _mtls(broker: dict) -> dict[str, str]:
    d = broker["dir"]
    return {"kafka.bootstrap.servers": broker["ssl"], "kafka.security.protocol": "SSL",
            "kafka.ssl.ca.location": str(d / "ca.pem"),
            "kafka.ssl.certificate.location": str(d / "client.pem"),
            "kafka.ssl.key.location": str(d / "client.key")}


def _read(spark, topic: str, options: dict[str, str]) -> list[str]:
    df = spark.read.format("jetkafka").options(**options).option("subscribe", topic).load()
    return sorted(r.value.decode() for r in df.select("value").collect())


def _write(spark, topic: str, options: dict[str, str], n: int = N) -> None:
    df = spark.range(n).selectExpr("CAST(id AS STRING) AS key", "concat('w', id) AS value")
    df.write.format("jetkafka").options(**options).option("topic", topic).mode("append").save()


def test_scram_over_sasl_ssl_with_sparks_jaas_config_and_a_password_file(spark, broker):
    topic = _topic(broker, N)
    jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{USER}" '
            f'password="{broker["password"]}";')
    assert _read(spark, topic, _scram(broker, **{"kafka.sasl.jaas.config": jaas})) == \
        sorted(f"v{i}" for i in range(N))
    out = _topic(broker)
    _write(spark, out, _scram(broker, **{"kafka.sasl.username": USER,
                                         "kafka.sasl.password.file": str(broker["dir"] / "password")}))
    assert _values(broker, out) == sorted(f"w{i}" for i in range(N))


def test_mtls_source_and_sink(spark, broker):
    topic = _topic(broker, N)
    assert _read(spark, topic, _mtls(broker)) == sorted(f"v{i}" for i in range(N))
    out = _topic(broker)
    _write(spark, out, _mtls(broker))
    assert _values(broker, out) == sorted(f"w{i}" for i in range(N))


@pytest.mark.parametrize("case, expected", [
    ("wrong password", "Authentication failed"),
    ("untrusted CA", "certificate verify failed"),
    ("hostname mismatch", "does not name the host given in kafka.bootstrap.servers"),
])
def test_refusals_are_clear_and_write_nothing(spark, broker, case, expected):
    options = _scram(broker, **{"kafka.sasl.username": USER, "kafka.sasl.password": broker["password"]})
    if case == "wrong password":
        options["kafka.sasl.password"] = "not-" + broker["password"]
    elif case == "untrusted CA":
        options["kafka.ssl.ca.location"] = str(broker["dir"] / "other-ca.pem")
    else:  # localhost is 127.0.0.1, but the certificate names only the address
        options["kafka.bootstrap.servers"] = broker["sasl_ssl"].replace("127.0.0.1", "localhost")
    out = _topic(broker)
    for run in (lambda: _write(spark, out, options, 5), lambda: _read(spark, _topic(broker, 3), options)):
        with pytest.raises(Exception) as err:  # Spark wraps jetkafka's error
            run()
        text = str(err.value)
        assert expected in text, text[-3000:]
        assert broker["password"] not in text
    assert _values(broker, out) == []
