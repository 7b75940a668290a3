"""No secret anywhere: a canary planted in every secret-bearing option of every format.

The canary goes into jetkafka (source and sink), jetrabbitmq and jetjdbc options, misspelt and
rejected ones included. Failing paths (a rejected or unknown option, a malformed url, a wrong
password, an unreachable broker) and succeeding ones run; then the exceptions (str, repr and
the Py4J/Spark-wrapped chain), everything the process and Spark's JVM wrote to stdout/stderr
(Spark's log: the test session logs to the console), Python's log records, and every file of
the checkpoints and the WAL folder are searched. The canary appears nowhere. Last, ``jetspark
inspect`` (table and ``--json``) reads the jetkafka and jetrabbitmq checkpoints with the canary
in its URLs, its walLocation and a ``--kafka-config`` file: not in its output either.
"""

from __future__ import annotations

import json
import logging
import traceback
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from pyspark_jetkafka import DefaultSource as JetKafka

from jetspark.datasources.rabbitmq.source import RabbitMQDataSource
from jetspark.devtools.cli import main as jetspark_cli
from jetspark.sinks.jdbc.writer import JdbcDataSource
from tests.integration.scripts.rabbitmq_common import publish

pytestmark = pytest.mark.integration

CANARY = f"Canary{uuid.uuid4().hex[:12]}"
UNKNOWN = {"pasword": CANARY, "sasl.password": CANARY}  # misspelt, and without the kafka. prefix
KAFKA_SECRETS = {  # settings librdkafka accepts; ignored on a PLAINTEXT listener
    "kafka.sasl.password": CANARY,
    "kafka.ssl.key.password": CANARY,
}


def _with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    netloc = f"{parts.username}:{password}@{parts.hostname}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _texts(error: BaseException) -> list[str]:
    """str, repr and formatted traceback of ``error`` and its cause/context chain, with the
    Java side of Py4J/Spark-wrapped exceptions."""
    out: list[str] = []
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        out += [str(e), repr(e), "".join(traceback.format_exception(e))]
        for attr in ("desc", "stackTrace", "java_exception"):
            value = getattr(e, attr, None)
            if value is not None:
                out.append(str(value))
        getter = getattr(e, "getMessage", None)
        if callable(getter):
            out.append(str(getter()))
        e = e.__cause__ or e.__context__
    return out


def _files(root: Path) -> list[bytes]:
    return [p.read_bytes() for p in root.rglob("*") if p.is_file()]


@pytest.fixture(scope="module")
def sspark(spark):
    for source in (JetKafka, RabbitMQDataSource, JdbcDataSource):
        spark.dataSource.register(source)
    return spark


def test_the_canary_appears_nowhere(sspark, kafka_bootstrap, kafka_topic, amqp_url, rabbit_queue, pg_dsn,
                                    pg_schema, tmp_path, capfd, caplog):
    spark = sspark
    caplog.set_level(logging.INFO)
    texts: list[str] = []

    def fails(run, must_name: str) -> None:
        with pytest.raises(Exception) as e:
            run()
        found = _texts(e.value)
        assert any(must_name in t for t in found), found[0]  # the error names the option
        texts.extend(found)

    def stream(reader, name: str) -> None:
        query = (reader.load().writeStream.format("noop")
                 .option("checkpointLocation", str(tmp_path / "cp" / name))
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert query.exception() is None

    # --- jetkafka sink: succeeds (secrets set, ignored on PLAINTEXT), then fails ---------------
    topic = kafka_topic()
    rows = spark.createDataFrame([(str(i), f"v{i}") for i in range(3)], "key string, value string")

    def sink(**options):
        writer = (rows.write.format("jetkafka").mode("append").option("topic", topic)
                  .option("guarantee", "at-least-once").option("commit", "none"))
        for k, v in options.items():
            writer = writer.option(k, v)
        writer.save()

    sink(**{"kafka.bootstrap.servers": kafka_bootstrap, **KAFKA_SECRETS})
    fails(lambda: sink(**{"kafka.bootstrap.servers": kafka_bootstrap, **UNKNOWN}), "pasword")
    fails(lambda: sink(**{"kafka.bootstrap.servers": kafka_bootstrap,
                          "kafka.sasl.jaas.config": f'x required password="{CANARY}";'}), "sasl.jaas.config")
    fails(lambda: sink(**{"kafka.bootstrap.servers": "127.0.0.1:1",
                          "kafka.security.protocol": "sasl_plaintext",
                          "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.username": "u",
                          "kafka.message.timeout.ms": "2000", **KAFKA_SECRETS}), "127.0.0.1:1")

    # --- jetkafka source: reads those rows (secrets set), then fails -----------------------------
    def kafka_source(**options):
        reader = spark.readStream.format("jetkafka").option("subscribe", topic).option(
            "startingOffsets", "earliest")
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader

    query = (kafka_source(**{"kafka.bootstrap.servers": kafka_bootstrap, **KAFKA_SECRETS,
                             "watermark.lateRecords": "keep"}).load()
             .where("NOT heartbeat").selectExpr("CAST(value AS STRING) AS value").writeStream.format("memory")
             .queryName("secrets_kafka").option("checkpointLocation", str(tmp_path / "cp" / "kafka"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert sorted(r.value for r in spark.table("secrets_kafka").collect()) == ["v0", "v1", "v2"]
    fails(lambda: stream(kafka_source(**{"kafka.bootstrap.servers": kafka_bootstrap, **UNKNOWN}), "k1"),
          "pasword")
    fails(lambda: stream(kafka_source(**{
        "kafka.bootstrap.servers": kafka_bootstrap, **KAFKA_SECRETS,
        "kafka.sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                  f'username="u" password="{CANARY}";',
        "kafka.sasl.pasword": CANARY}), "k2"), "kafka.sasl")

    # --- jetrabbitmq: succeeds, then fails -------------------------------------------------------
    wal = tmp_path / f"u:{CANARY}@wal"  # a folder name that looks like userinfo: never shown
    publish(amqp_url, rabbit_queue, ["m1", "m2"])

    def rabbit(url: str, wal_location: str = str(wal), **options):
        reader = (spark.readStream.format("jetrabbitmq").option("url", url).option("queue", rabbit_queue)
                  .option("walLocation", wal_location).option("reconnectTimeout", "1s"))
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader

    stream(rabbit(amqp_url), "rabbit")
    assert _files(wal), "the WAL folder holds the dedup and lease files"
    fails(lambda: stream(rabbit(amqp_url, **UNKNOWN), "r1"), "pasword")
    fails(lambda: stream(rabbit(" " + _with_password(amqp_url, CANARY)), "r2"), "url")
    fails(lambda: stream(rabbit(_with_password(amqp_url, CANARY) + f"?ssl_options={CANARY}"), "r3"), "url")
    fails(lambda: stream(rabbit(_with_password(amqp_url, CANARY), str(tmp_path / "wal2")), "r4"),
          urlsplit(amqp_url).hostname)
    fails(lambda: stream(rabbit(amqp_url, f"nosuchfs://key:{CANARY}@bucket/w?secret_key={CANARY}"), "r5"),
          "walLocation")

    # --- jetjdbc: succeeds (an unused sslpassword in the URL), then fails ------------------------
    table = f"{pg_schema}.events"

    def jdbc(url: str, **options):
        writer = (rows.write.format("jetjdbc").mode("append").option("url", url).option("table", table)
                  .option("createTable", "true").option("commit", "none")
                  .option("guarantee", "at-least-once"))
        for k, v in options.items():
            writer = writer.option(k, v)
        writer.save()

    sep = "&" if "?" in pg_dsn else "?"
    jdbc(f"{pg_dsn}{sep}sslpassword={CANARY}")
    fails(lambda: jdbc(pg_dsn, **UNKNOWN), "pasword")
    # a wrong password, in the URL and as the option: refused
    fails(lambda: jdbc(_with_password(pg_dsn, CANARY), password=CANARY), "PostgreSQL")
    parts = urlsplit(pg_dsn)
    fails(lambda: jdbc(f"host={parts.hostname} port={parts.port} user={parts.username} "
                       f"dbname={parts.path.lstrip('/')} password='it\\'s {CANARY}'"), "PostgreSQL")
    unreachable = urlunsplit(parts._replace(netloc=f"{parts.username}:{CANARY}@127.0.0.1:1"))
    fails(lambda: jdbc(unreachable, password=CANARY), "PostgreSQL")
    fails(lambda: jdbc(f"mysql://u:{CANARY}@h/db"), "url")

    # --- jetspark inspect on the jetkafka and jetrabbitmq checkpoints -----------------------------
    out, err = capfd.readouterr()
    kafka_config = tmp_path / "client.properties"
    kafka_config.write_text(f"bootstrap.servers={kafka_bootstrap}\nsasl.password={CANARY}\n")
    for output in ([], ["--json"]):
        code = jetspark_cli(["inspect", str(tmp_path / "cp" / "kafka"), "--kafka-config", str(kafka_config),
                             "--pg", _with_password(pg_dsn, CANARY), *output])
        shown, shown_err = capfd.readouterr()
        assert code == 1 and "postgresql: PostgreSQL at" in shown, shown + shown_err  # the wrong password
        if output:
            lags = [p["lag"] for p in json.loads(shown)["kafka"]]
            assert lags and set(lags) == {0}, shown  # Kafka was asked (with the file's settings)
        code = jetspark_cli(["inspect", str(tmp_path / "cp" / "rabbit"), "--wal-location", str(wal),
                             "--amqp", _with_password(amqp_url, CANARY), "--queue", rabbit_queue, *output])
        shown_rabbit, shown_rabbit_err = capfd.readouterr()
        assert code == 1, shown_rabbit + shown_rabbit_err  # the wrong password: rabbitmq is an error
        assert "rabbitmq: RabbitMQ at" in shown_rabbit and "***@wal" in shown_rabbit, shown_rabbit
        if output:
            assert json.loads(shown_rabbit)["wal"]["lease"]["files"] >= 1  # the WAL folder was read
        out, err = out + shown + shown_rabbit, err + shown_err + shown_rabbit_err

    # --- nowhere ---------------------------------------------------------------------------------
    out_rest, err_rest = capfd.readouterr()
    out, err = out + out_rest, err + err_rest
    logs = "\n".join(r.getMessage() for r in caplog.records)
    for where, text in (("exceptions", "\n".join(texts)), ("stdout", out), ("stderr/Spark log", err),
                        ("Python logs", logs)):
        assert CANARY not in text, f"the canary is in the {where}"
    for content in _files(tmp_path / "cp") + _files(wal):
        assert CANARY.encode() not in content
