"""jetjdbc against a PostgreSQL that takes only TLS connections with a password: the
certificate verified (``sslmode=verify-full``), the password from a file; and the ways it must
fail — a wrong password, an untrusted CA, a host the certificate does not name — each with a
clear error, nothing written, the password shown nowhere.

One server for the module, started here with a CA and certificate the test makes."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import trustme

from jetspark.devtools.services import postgres
from jetspark.devtools.services.process import stop
from jetspark.devtools.services.security import ServerTls
from jetspark.sinks.jdbc.writer import JdbcDataSource

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server() -> Iterator[dict]:
    # Not under pytest's tmp_path: PostgreSQL runs as 'postgres' when we are root and must be
    # able to reach its data directory.
    d = Path(tempfile.mkdtemp(prefix="jetspark-tls-postgres-"))
    d.chmod(0o711)
    ca, other_ca = trustme.CA(), trustme.CA()
    cert = ca.issue_cert("localhost")  # not 127.0.0.1: that name is the mismatch case
    for name, pem in (("ca.pem", ca.cert_pem), ("other-ca.pem", other_ca.cert_pem),
                      ("server.pem", cert.cert_chain_pems[0]), ("server.key", cert.private_key_pem)):
        pem.write_to_path(str(d / name))
    password = secrets.token_hex(12)
    (d / "password").write_text(password + "\n")
    record = postgres.start(d / "pg", tls=ServerTls(d / "ca.pem", d / "server.pem", d / "server.key"),
                            password=password)
    port = record.ports["server"]
    admin = f"postgresql://{postgres.USER}:{password}@localhost:{port}/{postgres.DATABASE}" \
            f"?sslmode=verify-full&sslrootcert={d / 'ca.pem'}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CREATE TABLE events (id bigint, name text)")
    try:
        yield {"port": port, "dir": d, "password": password, "admin": admin}
    finally:
        for proc in record.processes:
            stop(proc)
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def jspark(spark):
    spark.dataSource.register(JdbcDataSource)
    return spark


def _url(server: dict, host: str = "localhost", ca: str = "ca.pem") -> str:
    return (f"postgresql://{postgres.USER}@{host}:{server['port']}/{postgres.DATABASE}"
            f"?sslmode=verify-full&sslrootcert={server['dir'] / ca}")


def _count(server: dict) -> int:
    with psycopg.connect(server["admin"]) as conn:
        return conn.execute("SELECT count(*) FROM events").fetchone()[0]


def test_an_exactly_once_write_over_verified_tls_with_the_password_from_a_file(jspark, server):
    before = _count(server)
    df = jspark.range(0, 300, numPartitions=3).selectExpr("id", "concat('row-', id) AS name")
    (df.write.format("jetjdbc").option("url", _url(server)).option("table", "events")
     .option("password.file", str(server["dir"] / "password")).mode("append").save())
    assert _count(server) == before + 300  # over TLS: the server refuses anything else (below)


def test_plain_tcp_is_refused_by_the_server(server):
    plain = f"postgresql://{postgres.USER}:{server['password']}@127.0.0.1:{server['port']}/" \
            f"{postgres.DATABASE}?sslmode=disable"
    with pytest.raises(psycopg.OperationalError, match=r"no encryption|reject"):
        psycopg.connect(plain).close()


@pytest.mark.parametrize("case, expected", [
    ("wrong password", "password authentication failed"),
    ("untrusted CA", "certificate verify failed"),
    ("host not in the certificate", "does not match host name"),
])
def test_refusals_are_clear_and_write_nothing(jspark, server, case, expected):
    url, password = _url(server), server["password"]
    if case == "wrong password":
        password = "not-" + password
    elif case == "untrusted CA":
        url = _url(server, ca="other-ca.pem")
    else:
        url = _url(server, host="127.0.0.1")
    before = _count(server)
    df = jspark.range(0, 10, numPartitions=1).selectExpr("id", "concat('row-', id) AS name")
    with pytest.raises(Exception) as err:  # Spark wraps the sink's error
        (df.write.format("jetjdbc").option("url", url).option("table", "events")
         .option("password", password).mode("append").save())
    text = str(err.value)
    assert expected in text, text[-3000:]
    assert server["password"] not in text
    assert _count(server) == before
