"""jetrabbitmq against a broker with TLS: amqps with the broker's certificate verified, PLAIN
and EXTERNAL (client certificate) logins, credentials from options and from a file; and the
ways it must fail — a wrong password, an untrusted CA, a host the certificate does not name —
each with a clear error, nothing consumed, the secret shown nowhere.

One broker for the module, started here with a CA and certificates the test makes."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator

import pika
import pytest
import trustme

from jetspark.datasources.rabbitmq.source import RabbitMQDataSource
from jetspark.devtools.services import rabbitmq
from jetspark.devtools.services.process import stop
from jetspark.devtools.services.security import Login, ServerTls
from tests.integration.scripts.rabbitmq_common import publish, ready_count

pytestmark = pytest.mark.integration

USER = "jetspark"  # also the client certificate's common name: EXTERNAL logs it in as this user


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[dict]:
    d = tmp_path_factory.mktemp("tls-rabbitmq")
    ca, other_ca = trustme.CA(), trustme.CA()
    server = ca.issue_cert("localhost")  # not 127.0.0.1: that name is the mismatch case
    client = ca.issue_cert("client.jetspark.test", common_name=USER)
    files = {"ca": d / "ca.pem", "other_ca": d / "other-ca.pem", "server": d / "server.pem",
             "server_key": d / "server.key", "client": d / "client.pem", "client_key": d / "client.key"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    other_ca.cert_pem.write_to_path(str(files["other_ca"]))
    server.cert_chain_pems[0].write_to_path(str(files["server"]))
    server.private_key_pem.write_to_path(str(files["server_key"]))
    client.cert_chain_pems[0].write_to_path(str(files["client"]))
    client.private_key_pem.write_to_path(str(files["client_key"]))
    password = secrets.token_hex(12)
    (d / "password").write_text(password + "\n")
    record = rabbitmq.start(d / "node", tls=ServerTls(files["ca"], files["server"], files["server_key"]),
                            login=Login(USER, password))
    try:
        yield {"plain_url": record.endpoint, "port": record.ports["amqps"], "password": password,
               "password_file": d / "password", **files}
    finally:
        for proc in record.processes:
            stop(proc)


@pytest.fixture(scope="module")
def rspark(spark):
    spark.dataSource.register(RabbitMQDataSource)
    return spark


@pytest.fixture
def queue(broker) -> str:
    name = f"tls_{uuid.uuid4().hex[:8]}"
    conn = pika.BlockingConnection(pika.URLParameters(broker["plain_url"]))
    try:
        conn.channel().queue_declare(name, durable=True)
    finally:
        conn.close()
    publish(broker["plain_url"], name, [f"m{i}" for i in range(5)])
    return name


def _read(rspark, tmp_path, broker, queue: str, host: str = "localhost", **options) -> list[str]:
    """The message IDs one AvailableNow run takes from ``queue`` over amqps."""
    reader = (rspark.readStream.format("jetrabbitmq")
              .option("url", f"amqps://{host}:{broker['port']}/%2F").option("queue", queue)
              .option("walLocation", str(tmp_path / "wal")).option("ssl.ca.location", str(broker["ca"])))
    for k, v in options.items():
        reader = reader.option(k, str(v))
    got: list[str] = []
    query = (reader.load().writeStream.option("checkpointLocation", str(tmp_path / "cp"))
             .foreachBatch(lambda df, _id: got.extend(r.message_id for r in df.collect() if not r.heartbeat))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return sorted(got)


def test_plain_login_over_verified_tls_with_the_password_from_a_file(rspark, tmp_path, broker, queue):
    got = _read(rspark, tmp_path, broker, queue, user=USER, **{"password.file": broker["password_file"]})
    assert got == [f"m{i}" for i in range(5)]
    assert ready_count(broker["plain_url"], queue) == 0  # read, committed, acked


def test_external_login_with_the_client_certificate(rspark, tmp_path, broker, queue):
    got = _read(rspark, tmp_path, broker, queue, authMechanism="EXTERNAL",
                **{"ssl.certificate.location": broker["client"], "ssl.key.location": broker["client_key"]})
    assert got == [f"m{i}" for i in range(5)]


@pytest.mark.parametrize("case", ["wrong password", "untrusted CA", "host not in the certificate"])
def test_refusals_are_clear_and_consume_nothing(rspark, tmp_path, broker, queue, case):
    options: dict = {"user": USER, "password": broker["password"], "reconnectTimeout": "5 minutes"}
    host, expected = "localhost", "refused the login"
    if case == "wrong password":
        options["password"] = "not-" + broker["password"]
    elif case == "untrusted CA":
        options["ssl.ca.location"] = broker["other_ca"]
        expected = "certificate is not trusted"
    else:
        host, expected = "127.0.0.1", "certificate is not trusted"
    with pytest.raises(Exception) as err:  # Spark wraps the source's error
        _read(rspark, tmp_path, broker, queue, host=host, **options)
    text = str(err.value)
    assert expected in text, text[-3000:]
    assert broker["password"] not in text
    if case == "host not in the certificate":
        assert "IP address mismatch" in text or "Hostname mismatch" in text, text[-3000:]
    assert ready_count(broker["plain_url"], queue) == 5  # nothing consumed
