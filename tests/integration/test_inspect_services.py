"""``jetspark inspect`` against the real services, on a checkpoint written here (no Spark):
Kafka lag from the committed batch with a ``--kafka-config`` file, SASL settings reaching
librdkafka without showing their values, and PostgreSQL passwords from ``.pgpass``,
``PGPASSWORD`` and ``JETSPARK_PG_PASSWORD``."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import psycopg
import pytest
from confluent_kafka import Producer
from psycopg import sql

from jetspark.devtools.cli import main
from jetspark.inspect import inspect
from jetspark.inspect.credentials import PG_PASSWORD_ENV, Credentials, load
from jetspark.inspect.services import pg_connect

pytestmark = pytest.mark.integration

CANARY = "canary-5d1e0b"


def jetkafka_offset(topic: str, next_offsets: dict[int, int], start: dict[int, int] | None = None) -> dict:
    marks = {str(p): {"maxTs": 1_000 + p, "wm": 1_000 + p, "idle": False, "progressMs": 1}
             for p in next_offsets}
    return {"offsets": {topic: {str(p): o for p, o in next_offsets.items()}},
            **({"from": {topic: {str(p): o for p, o in start.items()}}} if start else {}),
            "watermark": 1_000, "partitions": {topic: marks}}


def write_checkpoint(root: Path, offsets: list[dict], committed: int) -> Path:
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "metadata").write_text('{"id":"00000000-0000-4000-8000-000000000001"}\n')
    for batch, offset in enumerate(offsets):
        (root / "offsets" / str(batch)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{json.dumps(offset)}')
        if batch < committed:
            (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return root


def test_kafka_lag_from_the_committed_batch_with_a_config_file(kafka_bootstrap, kafka_topic, tmp_path,
                                                              capsys):
    topic = kafka_topic(partitions=2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for p, n in ((0, 10), (1, 6)):
        for _ in range(n):
            producer.produce(topic, value=b"x", partition=p)
    assert producer.flush(30) == 0
    # batch 0 committed up to (4, 2); batch 1 planned up to (8, 5), not committed
    cp = write_checkpoint(tmp_path / "cp", [jetkafka_offset(topic, {0: 4, 1: 2}, start={0: 0, 1: 0}),
                                            jetkafka_offset(topic, {0: 8, 1: 5})], committed=1)
    config = tmp_path / "client.properties"
    config.write_text(f"# the cluster\nbootstrap.servers={kafka_bootstrap}\nclient.id=inspect-test\n")
    assert main(["inspect", str(cp), "--kafka-config", str(config), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["errors"] == [] and data["kafkaLagBatch"] == 0
    assert [(k["partition"], k["offset"], k["end"], k["lag"]) for k in data["kafka"]] == [
        (0, 4, 10, 6), (1, 2, 6, 4)]
    assert main(["inspect", str(cp), "--kafka", kafka_bootstrap]) == 0
    rows = capsys.readouterr().out.split("partitions after batch 1:\n")[1].splitlines()
    assert [r.split()[-4:] for r in rows[1:3]] == [["8", "4", "10", "6"], ["5", "2", "6", "4"]]
    assert rows[3].startswith("lag: ") and "after batch 0, the last committed" in rows[3]

    # nothing committed yet: lag from the starting offsets
    (cp / "commits" / "0").unlink()
    report = inspect(str(cp), credentials=load(kafka_config_file=str(config)))
    assert report.lag_batch is None and [(k.offset, k.lag) for k in report.kafka] == [(0, 10), (0, 6)]


def test_sasl_settings_reach_librdkafka_and_never_show(kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(partitions=1)
    cp = write_checkpoint(tmp_path / "cp", [jetkafka_offset(topic, {0: 0})], committed=1)
    sasl = {"bootstrap.servers": kafka_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": CANARY, "sasl.password": CANARY}
    report = inspect(str(cp), credentials=Credentials(kafka_config=sasl), timeout_s=3)
    (error,) = report.errors  # the plaintext listener cannot speak SASL: the settings were used
    assert error.startswith(f"kafka: Kafka at {kafka_bootstrap}: end offset of {topic}[0]")
    assert CANARY not in report.text() + json.dumps(report.to_json())


@pytest.fixture
def probe_role(pg_dsn):
    """(DSN of a throwaway login role without any password source, setter of its password): a
    connection succeeds only with the password set last, so it shows which source libpq used."""
    role = f"probe_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))

        def set_password(password: str) -> None:
            admin.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(role),
                                                                      sql.Literal(password)))

        params = psycopg.conninfo.conninfo_to_dict(pg_dsn)
        for source in ("password", "passfile"):
            params.pop(source, None)
        yield psycopg.conninfo.make_conninfo(**{**params, "user": role}), set_password
        admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_pg_password_from_pgpass_pgpassword_and_the_environment(probe_role, tmp_path, monkeypatch, capsys):
    """libpq (under psycopg) reads PGPASSWORD and the password file when the URL holds no
    password; inspect's own sources come first. Each step sets the role's password to what only
    the source under test holds, so connecting proves that source was used."""
    dsn, set_password = probe_role
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.delenv(PG_PASSWORD_ENV, raising=False)
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"*:{params.get('port', '*')}:*:{params['user']}:from-pgpass\n")
    pgpass.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(pgpass))
    set_password("from-pgpass")
    with pg_connect(dsn) as conn:
        assert conn.info.password == "from-pgpass"
    monkeypatch.setenv("PGPASSWORD", "from-pgpassword")  # libpq: PGPASSWORD before the file
    set_password("from-pgpassword")
    with pg_connect(dsn) as conn:
        assert conn.info.password == "from-pgpassword"
    monkeypatch.setenv(PG_PASSWORD_ENV, "from-jetspark-env")  # inspect's own, before libpq's
    set_password("from-jetspark-env")
    with pg_connect(dsn, load().pg_password) as conn:
        assert conn.info.password == "from-jetspark-env"

    cp = write_checkpoint(tmp_path / "cp", [jetkafka_offset("t", {0: 0})], committed=1)
    monkeypatch.setenv(PG_PASSWORD_ENV, CANARY)
    set_password(CANARY)
    assert main(["inspect", str(cp), "--pg", dsn, "--json"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["errors"] == [] and data["prepared"] == [] and CANARY not in out + err
