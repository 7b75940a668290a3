"""No secret anywhere: a canary planted in every secret-bearing option of every format, searched
for in the output of every process.

The canary goes into jetkafka (source and sink), jetrabbitmq and jetjdbc options, misspelt and
rejected ones included. Failing paths (a rejected or unknown option, a malformed url, a wrong
password, an unreachable broker, a config librdkafka quotes a piece of) and succeeding ones run
in a driver script of their own (tests/integration/scripts/secrets_canary_query.py) with its
stdout and stderr captured: its Python logging, its Spark JVM's log (log4j at INFO) and its
Python workers' stderr (Spark copies it to the JVM's) land there. Then the exceptions (str,
repr and the Py4J/Spark-wrapped chain), that output, and every file of the checkpoints and
the WAL folder are searched; and ``jetspark inspect`` (table and ``--json``), run here, reads
the jetkafka and jetrabbitmq checkpoints with the canary in its URLs, its walLocation and a
``--kafka-config`` file. The canary appears nowhere. Over Spark Connect, a client sends such
options to a server: the client's output and the server's log (its JVM and its Python workers)
are searched too.

The search can fail: a test-only UDF logs a marker from a Python worker (the driver's, and
the Connect server's), and the marker is found where the canary is looked for.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from jetspark.devtools.cli import main as jetspark_cli
from jetspark.devtools.services.registry import ServiceRecord
from tests.faults_harness import run_script

pytestmark = pytest.mark.integration

CANARY = f"Canary{uuid.uuid4().hex[:12]}"
SCRIPTS = Path(__file__).parent / "scripts"
JVM_LOG_LINE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d INFO \w+: ", re.MULTILINE)  # log4j's console


def _with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    netloc = f"{parts.username}:{password}@{parts.hostname}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _files(root: Path) -> list[bytes]:
    return [p.read_bytes() for p in root.rglob("*") if p.is_file()]


def _found_in(marker: str, places: dict[str, str | bytes]) -> list[str]:
    """The places whose text holds ``marker``."""
    return [where for where, text in places.items()
            if (marker.encode() if isinstance(text, bytes) else marker) in text]


def _run(script: str, config: dict, tmp_path: Path, timeout_s: float) -> str:
    """Run ``script`` with ``config``; its stdout and stderr (with its JVM's and workers')."""
    (tmp_path / "config.json").write_text(json.dumps(config))
    run = run_script(SCRIPTS / script, str(tmp_path / "config.json"), state_dir=tmp_path, timeout_s=timeout_s)
    run.check_ok()
    assert "RESULT ok" in run.output
    return run.output


def test_the_canary_appears_nowhere(kafka_bootstrap, kafka_topic, amqp_url, rabbit_queue, pg_dsn, pg_schema,
                                    tmp_path, capfd, caplog):
    caplog.set_level(logging.INFO)
    out = tmp_path / "out"
    out.mkdir()
    wal = out / f"u:{CANARY}@wal"  # a folder name that looks like userinfo: never shown
    leak = f"Leak{uuid.uuid4().hex[:12]}"
    driver = _run("secrets_canary_query.py", {
        "canary": CANARY, "leak": leak, "out": str(out), "wal": str(wal), "kafka_bootstrap": kafka_bootstrap,
        "topic": kafka_topic(), "amqp_url": amqp_url, "queue": rabbit_queue, "pg_dsn": pg_dsn,
        "pg_schema": pg_schema}, tmp_path, timeout_s=900)
    texts = json.loads((out / "texts.json").read_text())
    assert JVM_LOG_LINE.search(driver), "the driver JVM's log is in the output"
    assert _files(wal), "the WAL folder holds the dedup and lease files"

    # --- jetspark inspect on the jetkafka and jetrabbitmq checkpoints -----------------------------
    shown_out, shown_err = capfd.readouterr()
    kafka_config = tmp_path / "client.properties"
    kafka_config.write_text(f"bootstrap.servers={kafka_bootstrap}\nsasl.password={CANARY}\n")
    for output in ([], ["--json"]):
        code = jetspark_cli(["inspect", str(out / "cp" / "kafka"), "--kafka-config", str(kafka_config),
                             "--pg", _with_password(pg_dsn, CANARY), *output])
        shown, err = capfd.readouterr()
        assert code == 1 and "postgresql: PostgreSQL at" in shown, shown + err  # the wrong password
        if output:
            lags = [p["lag"] for p in json.loads(shown)["kafka"]]
            assert lags and set(lags) == {0}, shown  # Kafka was asked (with the file's settings)
        code = jetspark_cli(["inspect", str(out / "cp" / "rabbit"), "--wal-location", str(wal),
                             "--amqp", _with_password(amqp_url, CANARY), "--queue", rabbit_queue, *output])
        shown_rabbit, err_rabbit = capfd.readouterr()
        assert code == 1, shown_rabbit + err_rabbit  # the wrong password: rabbitmq is an error
        assert "rabbitmq: RabbitMQ at" in shown_rabbit and "***@wal" in shown_rabbit, shown_rabbit
        if output:
            assert json.loads(shown_rabbit)["wal"]["lease"]["files"] >= 1  # the WAL folder was read
        shown_out += shown + shown_rabbit
        shown_err += err + err_rabbit

    # --- nowhere ---------------------------------------------------------------------------------
    rest_out, rest_err = capfd.readouterr()
    places: dict[str, str | bytes] = {
        "exceptions": "\n".join(texts), "driver's output (its logging, JVM log, workers' stderr)": driver,
        "test's stdout": shown_out + rest_out, "test's stderr": shown_err + rest_err,
        "test's Python logs": "\n".join(r.getMessage() for r in caplog.records),
        **{f"checkpoint file {i}": content for i, content in enumerate(_files(out / "cp"))},
        **{f"WAL file {i}": content for i, content in enumerate(_files(wal))},
    }
    assert _found_in(leak, places) == ["driver's output (its logging, JVM log, workers' stderr)"]
    assert _found_in(CANARY, places) == []


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory) -> Iterator[ServiceRecord]:
    """A Spark Connect server of this module (as tests/conftest.py's ``spark_connect``): its
    record, whose folder holds its log (``server.log``: its JVM's and Python workers' output)."""
    from jetspark.devtools.services import spark_connect
    from jetspark.devtools.services.process import stop

    record = spark_connect.start(tmp_path_factory.mktemp("secrets-connect"))
    yield record
    for process in record.processes:
        stop(process)


def test_the_canary_appears_nowhere_over_spark_connect(connect_server, kafka_bootstrap, kafka_topic, pg_dsn,
                                                       pg_schema, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    leak = f"Leak{uuid.uuid4().hex[:12]}"
    log = Path(connect_server.data_dir) / "server.log"
    client = _run("secrets_canary_connect.py", {
        "remote": connect_server.endpoint, "canary": CANARY, "leak": leak, "out": str(out),
        "kafka_bootstrap": kafka_bootstrap, "topic": kafka_topic(), "pg_dsn": pg_dsn, "pg_schema": pg_schema},
        tmp_path, timeout_s=600)
    places: dict[str, str | bytes] = {
        "exceptions": "\n".join(json.loads((out / "texts.json").read_text())),
        "client's output": client, "Connect server's log": log.read_bytes()}
    assert JVM_LOG_LINE.search(log.read_text(errors="replace")), "the server JVM's log is in server.log"
    assert _found_in(leak, places) == ["Connect server's log"]
    assert _found_in(CANARY, places) == []
