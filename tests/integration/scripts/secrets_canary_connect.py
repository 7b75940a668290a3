"""The secrets canary over Spark Connect, for tests/integration/test_secrets.py: a client that
sends options with a canary in their secrets to a Connect server, where jetspark runs.

Usage: secrets_canary_connect.py CONFIG_JSON

CONFIG_JSON holds ``remote`` (the server's ``sc://`` URL), the Kafka and PostgreSQL
endpoints, a topic, a schema, the canary, a ``leak`` marker and ``out`` (a folder: the
error texts go to ``texts.json``). The server's log (its JVM's log4j output and its Python
workers' stderr) and this client's output are searched by the test; one test-only UDF logs
the ``leak`` marker from a server's worker, which the test finds in the server's log.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from tests.integration.scripts.secrets_canary_query import _texts


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    canary, out, leak = config["canary"], Path(config["out"]), config["leak"]
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import udf

    spark = SparkSession.builder.remote(config["remote"]).getOrCreate()
    texts: list[str] = []

    def fails(run, must_name: str) -> None:
        try:
            run()
        except Exception as e:
            found = _texts(e)
            assert any(must_name in t for t in found), found[0]
            texts.extend(found)
            return
        raise AssertionError(f"expected a failure naming {must_name}")

    @udf("string")
    def leaky(x: int) -> str:
        logging.getLogger("jetspark.canary.leak").warning("server worker log line %s", leak)
        return str(x)

    assert [r[0] for r in spark.range(1).select(leaky("id")).collect()] == ["0"]

    topic, bootstrap = config["topic"], config["kafka_bootstrap"]
    secrets = {"kafka.sasl.password": canary, "kafka.ssl.key.password": canary}  # ignored on PLAINTEXT
    back = (spark.read.format("jetkafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).options(**secrets).load())
    assert back.count() == 0  # an empty topic, read with the secrets set
    fails(lambda: spark.read.format("jetkafka").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("pasword", canary).load().collect(), "pasword")
    # librdkafka quotes the rest of an unsecured-JWT config from where its parser stopped
    fails(lambda: spark.read.format("jetkafka").option("subscribe", topic).options(**{
        "kafka.bootstrap.servers": "127.0.0.1:1", "kafka.security.protocol": "sasl_plaintext",
        "kafka.sasl.mechanism": "OAUTHBEARER", "kafka.enable.sasl.oauthbearer.unsecure.jwt": "true",
        "kafka.sasl.oauthbearer.config": f"principal=u {canary}-and-more"}).load().collect(),
        "sasl.oauthbearer.config")
    parts = urlsplit(config["pg_dsn"])
    wrong = urlunsplit(parts._replace(netloc=f"{parts.username}:{canary}@{parts.hostname}:{parts.port}"))
    rows = spark.createDataFrame([("k", "v")], "key string, value string")
    fails(lambda: rows.write.format("jetjdbc").mode("append").option("url", wrong)
          .option("table", f"{config['pg_schema']}.events").option("password", canary)
          .option("guarantee", "at-least-once").option("commit", "none").option("createTable", "true").save(),
          "PostgreSQL")

    (out / "texts.json").write_text(json.dumps(texts))
    spark.stop()
    print("RESULT ok", flush=True)


if __name__ == "__main__":
    main()
