"""``jetspark inspect``'s credentials: files, the environment, ``--kafka-config``; no value of
them in any output, and a warning (naming no value) for a password on the command line."""

from __future__ import annotations

import json

import pytest

from jetspark.devtools.cli import main
from jetspark.errors import ServiceError
from jetspark.inspect import credentials, inspect
from jetspark.inspect.credentials import (
    AMQP_PASSWORD_ENV,
    PG_PASSWORD_ENV,
    CredentialError,
    Credentials,
    kafka_config_from_file,
    load,
    password_from_file,
    url_has_password,
)
from jetspark.inspect.services import kafka_lag
from tests.unit.jetspark.inspect.test_inspect import kafka_offset, write_checkpoint

CANARY = "canary-7f3a9e"


def test_kafka_config_file_is_key_value_lines_with_comments(tmp_path):
    f = tmp_path / "client.properties"
    f.write_text("# a secured cluster\n! also a comment\n\nbootstrap.servers = broker:9093\n"
                 "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                 f"sasl.username=inspect\nsasl.password={CANARY}=x\n")
    assert kafka_config_from_file(str(f)) == {
        "bootstrap.servers": "broker:9093", "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "inspect", "sasl.password": f"{CANARY}=x"}


def test_a_malformed_kafka_config_line_is_named_by_number_not_content(tmp_path):
    f = tmp_path / "client.properties"
    f.write_text(f"security.protocol=SASL_SSL\nsasl.password {CANARY}\n")
    with pytest.raises(CredentialError, match=r"client.properties, line 2: not a key=value") as e:
        kafka_config_from_file(str(f))
    assert CANARY not in str(e.value)


def test_password_file_is_its_first_line(tmp_path):
    f = tmp_path / "pw"
    f.write_text(f"{CANARY}\nignored\n")
    assert password_from_file(str(f), "--pg-password-file") == CANARY
    f.write_text("\n")
    with pytest.raises(CredentialError, match="the first line is empty"):
        password_from_file(str(f), "--pg-password-file")
    with pytest.raises(CredentialError, match=r"--pg-password-file .*missing: cannot be read"):
        password_from_file(str(tmp_path / "missing"), "--pg-password-file")


def test_files_come_before_the_environment(tmp_path):
    env = {PG_PASSWORD_ENV: "from-env", AMQP_PASSWORD_ENV: "amqp-env"}
    assert (load(environ=env).pg_password, load(environ=env).amqp_password) == ("from-env", "amqp-env")
    f = tmp_path / "pw"
    f.write_text("from-file\n")
    got = load(pg_password_file=str(f), amqp_password_file=str(f), environ=env)
    assert (got.pg_password, got.amqp_password) == ("from-file", "from-file")
    assert load(environ={}) == Credentials()
    assert CANARY not in repr(Credentials(CANARY, CANARY, {"sasl.password": CANARY}))


@pytest.mark.parametrize(("url", "has"), [
    ("postgresql://u:pw@h/db", True), ("jdbc:postgresql://u:pw@h:5432/db", True),
    ("postgresql://u@h/db", False), ("host=h user=u password=pw", True), ("host=h user=u", False),
    ("amqp://guest:guest@h:5672/%2F", True), ("amqp://h:5672/", False), ("http://u@h:15672", False),
])
def test_url_has_password(url, has):
    assert url_has_password(url) is has


def test_refused_kafka_settings_never_echo_a_value():
    config = {"security.protocol": CANARY, "sasl.password": CANARY}  # librdkafka echoes a bad value
    with pytest.raises(ServiceError, match="the settings were refused") as e:
        kafka_lag("127.0.0.1:1", [("t", 0, 0)], config=config)
    assert CANARY not in str(e.value) and '"security.protocol"' in str(e.value)


def test_cli_warns_of_a_password_on_the_command_line_and_never_prints_it(tmp_path, capsys):
    root = write_checkpoint(tmp_path / "cp", {0: [kafka_offset(0)]}, commits=[0])
    code = main(["inspect", str(root), "--json", "--pg", f"postgresql://nobody:{CANARY}@127.0.0.1:1/none",
                 "--amqp", f"amqp://nobody:{CANARY}@127.0.0.1:1/", "--queue", "q"])
    out, err = capsys.readouterr()
    assert code == 1 and CANARY not in out + err
    assert "warning: --pg carries a password" in err and "warning: --amqp carries a password" in err
    assert {e.split(":")[0] for e in json.loads(out)["errors"]} == {"postgresql", "rabbitmq"}


def test_cli_takes_passwords_from_files_and_the_environment_and_never_prints_them(tmp_path, capsys,
                                                                                  monkeypatch):
    root = write_checkpoint(tmp_path / "cp", {0: [kafka_offset(0)]}, commits=[0])
    pw = tmp_path / "pw"
    pw.write_text(CANARY + "\n")
    kafka = tmp_path / "client.properties"
    kafka.write_text(f"bootstrap.servers=127.0.0.1:1\nsecurity.protocol={CANARY}\n")
    monkeypatch.setenv(PG_PASSWORD_ENV, CANARY)
    code = main(["inspect", str(root), "--pg", "postgresql://nobody@127.0.0.1:1/none",
                 "--amqp", "amqp://nobody@127.0.0.1:1/", "--queue", "q", "--amqp-password-file", str(pw),
                 "--kafka-config", str(kafka)])
    out, err = capsys.readouterr()
    assert code == 1 and CANARY not in out + err and "warning" not in err
    # the Kafka settings were used (bootstrap.servers from the file stands for --kafka)
    assert "error: kafka: Kafka at 127.0.0.1:1: the settings were refused" in out
    assert "error: postgresql: " in out and "error: rabbitmq: " in out


def test_unreachable_services_are_each_asked_and_reported(tmp_path):
    root = write_checkpoint(tmp_path / "cp", {0: [kafka_offset(0)]}, commits=[0])
    report = inspect(str(root), kafka="127.0.0.1:1", pg="postgresql://nobody@127.0.0.1:1/none",
                     amqp="amqp://x@127.0.0.1:1/", queue="q", timeout_s=3,
                     credentials=credentials.Credentials(CANARY, CANARY, {"sasl.username": CANARY}))
    by_service = {e.split(":")[0]: e for e in report.errors}
    assert set(by_service) == {"kafka", "postgresql", "rabbitmq"}
    # each was tried: the partition's end offset, the AMQP connection, the PostgreSQL connection
    assert "end offset of orders[0]" in by_service["kafka"]
    assert "broker connections are down" in by_service["kafka"]
    assert "AMQPConnectionError" in by_service["rabbitmq"]
    assert "Connection refused" in by_service["postgresql"]
    assert (report.kafka, report.queue, report.prepared) == (None, None, None)
    assert CANARY not in report.text() + json.dumps(report.to_json())
