"""The secrets canary's driver, for tests/integration/test_secrets.py: every format with a canary
in every secret-bearing option, succeeding and failing, in a Spark of its own.

Usage: secrets_canary_query.py CONFIG_JSON

CONFIG_JSON holds the endpoints, topic, queue, schema, the canary, a ``leak`` marker and
``out`` (a folder: checkpoints under ``cp``, the WAL under ``wal``, the error texts written
to ``texts.json``). The test runs it with stdout and stderr captured: this process's own
output and logging, its Spark JVM's log (log4j's console, at INFO) and the Python workers'
stderr (Spark copies it to the JVM's) all land there. One test-only UDF logs the ``leak``
marker from a worker: the test finds it, which shows that a worker's log line is searched.
Exits 0 when every step went as expected (an ``assert`` fails it otherwise).
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from jetspark.devtools.spark import local_session
from tests.integration.scripts.rabbitmq_common import publish


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


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    canary, out = config["canary"], Path(config["out"])
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    # INFO from the start; a worker slow to start on a loaded machine is waited for (15 s by default)
    spark = local_session("jetspark-secrets-canary", conf={"spark.log.level": "INFO",
                                                           "spark.python.authenticate.socketTimeout": "120s"})
    spark.sparkContext.setLogLevel("INFO")  # local_session sets WARN
    from pyspark_jetkafka import DefaultSource as JetKafka

    from jetspark.datasources.rabbitmq.source import RabbitMQDataSource
    from jetspark.sinks.jdbc.writer import JdbcDataSource

    for source in (JetKafka, RabbitMQDataSource, JdbcDataSource):
        spark.dataSource.register(source)
    unknown = {"pasword": canary, "sasl.password": canary}  # misspelt, and without the kafka. prefix
    kafka_secrets = {"kafka.sasl.password": canary, "kafka.ssl.key.password": canary}  # ignored on PLAINTEXT
    texts: list[str] = []

    def fails(run, must_name: str) -> None:
        try:
            run()
        except Exception as e:
            found = _texts(e)
            assert any(must_name in t for t in found), found[0]  # the error names the option
            texts.extend(found)
            return
        raise AssertionError(f"expected a failure naming {must_name}")

    def stream(reader, name: str) -> None:
        query = (reader.load().writeStream.format("noop")
                 .option("checkpointLocation", str(out / "cp" / name))
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert query.exception() is None

    # --- a worker that logs a line: the test must find it -----------------------------------------
    from pyspark.sql.functions import udf

    @udf("string")
    def leaky(x: int) -> str:
        logging.getLogger("jetspark.canary.leak").warning("worker log line %s", config["leak"])
        return str(x)

    assert [r[0] for r in spark.range(1).select(leaky("id")).collect()] == ["0"]

    # --- jetkafka sink: succeeds (secrets set, ignored on PLAINTEXT), then fails ---------------
    topic, bootstrap = config["topic"], config["kafka_bootstrap"]
    rows = spark.createDataFrame([(str(i), f"v{i}") for i in range(3)], "key string, value string")

    def sink(**options):
        writer = (rows.write.format("jetkafka").mode("append").option("topic", topic)
                  .option("guarantee", "at-least-once").option("commit", "none"))
        for k, v in options.items():
            writer = writer.option(k, v)
        writer.save()

    sink(**{"kafka.bootstrap.servers": bootstrap, **kafka_secrets})
    fails(lambda: sink(**{"kafka.bootstrap.servers": bootstrap, **unknown}), "pasword")
    fails(lambda: sink(**{"kafka.bootstrap.servers": bootstrap,
                          "kafka.sasl.jaas.config": f'x required password="{canary}";'}), "sasl.jaas.config")
    fails(lambda: sink(**{"kafka.bootstrap.servers": "127.0.0.1:1",
                          "kafka.security.protocol": "sasl_plaintext",
                          "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.username": "u",
                          "kafka.message.timeout.ms": "2000", **kafka_secrets}), "127.0.0.1:1")

    # --- jetkafka source: reads those rows (secrets set), then fails -----------------------------
    def kafka_source(**options):
        reader = spark.readStream.format("jetkafka").option("subscribe", topic).option(
            "startingOffsets", "earliest")
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader

    query = (kafka_source(**{"kafka.bootstrap.servers": bootstrap, **kafka_secrets,
                             "watermark.lateRecords": "keep"}).load()
             .where("NOT heartbeat").selectExpr("CAST(value AS STRING) AS value").writeStream.format("memory")
             .queryName("secrets_kafka").option("checkpointLocation", str(out / "cp" / "kafka"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert sorted(r.value for r in spark.table("secrets_kafka").collect()) == ["v0", "v1", "v2"]
    fails(lambda: stream(kafka_source(**{"kafka.bootstrap.servers": bootstrap, **unknown}), "k1"), "pasword")
    fails(lambda: stream(kafka_source(**{
        "kafka.bootstrap.servers": bootstrap, **kafka_secrets,
        "kafka.sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                  f'username="u" password="{canary}";',
        "kafka.sasl.pasword": canary}), "k2"), "kafka.sasl")
    # librdkafka quotes the rest of an unsecured-JWT config from where its parser stopped
    fails(lambda: stream(kafka_source(**{
        "kafka.bootstrap.servers": "127.0.0.1:1", "kafka.security.protocol": "sasl_plaintext",
        "kafka.sasl.mechanism": "OAUTHBEARER", "kafka.enable.sasl.oauthbearer.unsecure.jwt": "true",
        "kafka.sasl.oauthbearer.config": f"principal=u {canary}-and-more"}), "k3"), "sasl.oauthbearer.config")

    # --- jetrabbitmq: succeeds, then fails -------------------------------------------------------
    amqp_url, queue = config["amqp_url"], config["queue"]
    wal = Path(config["wal"])  # a folder name that looks like userinfo: never shown
    publish(amqp_url, queue, ["m1", "m2"])

    def rabbit(url: str, wal_location: str = str(wal), **options):
        reader = (spark.readStream.format("jetrabbitmq").option("url", url).option("queue", queue)
                  .option("walLocation", wal_location).option("reconnectTimeout", "1s"))
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader

    stream(rabbit(amqp_url), "rabbit")
    fails(lambda: stream(rabbit(amqp_url, **unknown), "r1"), "pasword")
    fails(lambda: stream(rabbit(" " + _with_password(amqp_url, canary)), "r2"), "url")
    fails(lambda: stream(rabbit(_with_password(amqp_url, canary) + f"?ssl_options={canary}"), "r3"), "url")
    fails(lambda: stream(rabbit(_with_password(amqp_url, canary), str(out / "wal2")), "r4"),
          urlsplit(amqp_url).hostname)
    fails(lambda: stream(rabbit(amqp_url, f"nosuchfs://key:{canary}@bucket/w?secret_key={canary}"), "r5"),
          "walLocation")

    # --- jetjdbc: succeeds (an unused sslpassword in the URL), then fails ------------------------
    pg_dsn = config["pg_dsn"]
    table = f"{config['pg_schema']}.events"

    def jdbc(url: str, **options):
        writer = (rows.write.format("jetjdbc").mode("append").option("url", url).option("table", table)
                  .option("createTable", "true").option("commit", "none")
                  .option("guarantee", "at-least-once"))
        for k, v in options.items():
            writer = writer.option(k, v)
        writer.save()

    sep = "&" if "?" in pg_dsn else "?"
    jdbc(f"{pg_dsn}{sep}sslpassword={canary}")
    fails(lambda: jdbc(pg_dsn, **unknown), "pasword")
    # a wrong password, in the URL and as the option: refused
    fails(lambda: jdbc(_with_password(pg_dsn, canary), password=canary), "PostgreSQL")
    parts = urlsplit(pg_dsn)
    fails(lambda: jdbc(f"host={parts.hostname} port={parts.port} user={parts.username} "
                       f"dbname={parts.path.lstrip('/')} password='it\\'s {canary}'"), "PostgreSQL")
    unreachable = urlunsplit(parts._replace(netloc=f"{parts.username}:{canary}@127.0.0.1:1"))
    fails(lambda: jdbc(unreachable, password=canary), "PostgreSQL")
    fails(lambda: jdbc(f"mysql://u:{canary}@h/db"), "url")

    (out / "texts.json").write_text(json.dumps(texts))
    spark.stop()
    print("RESULT ok", flush=True)


if __name__ == "__main__":
    main()
