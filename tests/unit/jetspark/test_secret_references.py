"""Credentials given as ``X.file`` / ``X.env``: read once, seen as ``X``, never shown; only
regular files of at most 64 KiB under ``JETSPARK_SECRET_DIRS``, only the variables of
``JETSPARK_SECRET_ENV``, and nothing read before the unknown options are refused."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from jetspark.datasources.kafka.options import KafkaSourceOptions
from jetspark.datasources.rabbitmq.options import RabbitMQOptions
from jetspark.errors import OptionError
from jetspark.options import Options
from jetspark.secret_references import MAX_FILE_BYTES, resolve_secret_references
from jetspark.sinks.kafka.options import KafkaSinkOptions
from sinks.jdbc.options import JdbcSinkOptions

CANARY = "c4n4ry-s3cret"


@pytest.fixture
def secrets_dir(tmp_path, monkeypatch):
    """A folder of JETSPARK_SECRET_DIRS, the only one."""
    folder = tmp_path / "secrets"
    folder.mkdir()
    monkeypatch.setenv("JETSPARK_SECRET_DIRS", str(folder))
    return folder


def _refused(raw, *, environ=None) -> str:
    with pytest.raises(OptionError) as err:
        resolve_secret_references(raw, environ)
    text = str(err.value)
    assert any(k in text for k in raw), text  # names the option …
    assert CANARY not in text and CANARY not in repr(err.value)  # … never the path nor the content
    return text


def test_file_reference_reads_the_value_without_its_trailing_newline(secrets_dir):
    secret = secrets_dir / "pw"
    secret.write_text(CANARY + "\n")
    got = resolve_secret_references({"url": "postgresql://db/x", "password.file": str(secret)})
    assert got == {"url": "postgresql://db/x", "password": CANARY}


def test_env_reference_and_any_case(monkeypatch):
    monkeypatch.setenv("JETSPARK_SECRET_SASL", CANARY)
    opts = Options({"Kafka.SASL.Password.ENV": "JETSPARK_SECRET_SASL"})
    assert opts.with_prefix("kafka.") == {"SASL.Password": CANARY}


def test_a_value_with_inner_newlines_is_kept_whole(secrets_dir):
    jaas = secrets_dir / "jaas"
    jaas.write_text('org.apache.kafka.common.security.plain.PlainLoginModule required\n  username="u";\n')
    got = resolve_secret_references({"kafka.sasl.jaas.config.file": str(jaas)})
    assert got["kafka.sasl.jaas.config"].endswith('username="u";')
    assert "\n  username" in got["kafka.sasl.jaas.config"]


@pytest.mark.parametrize("raw, words", [
    ({"password": "x", "password.file": "/p"}, "either password or password.file"),
    ({"password.env": "A", "PASSWORD.file": "/p"}, "not both"),
    ({"kafka.bootstrap.servers.file": "/p"}, "only a credential option"),
    ({"password.env": "JETSPARK_SECRET_NO_SUCH_VARIABLE"}, "a set environment variable"),
    ({"password.file": "/run/secrets/nonexistent/jetspark/pw"}, "regular UTF-8 file"),
])
def test_misuse_names_the_option_and_what_is_accepted(raw, words):
    assert words in _refused(raw)


def test_a_reference_never_shows_its_target_or_value(secrets_dir):
    _refused({"password.file": str(secrets_dir / CANARY)})


def test_a_format_sees_the_value_and_hides_it(secrets_dir):
    secret = secrets_dir / "pw"
    secret.write_text(CANARY)
    o = JdbcSinkOptions.parse({"url": "postgresql://127.0.0.1/db", "table": "t",
                               "password.file": str(secret)})
    assert o.password == CANARY
    assert CANARY not in repr(o)
    assert CANARY in o.secrets()


# --- what a file reference may read ---------------------------------------------------------------

def test_no_file_unless_the_folders_are_set(tmp_path, monkeypatch):
    monkeypatch.delenv("JETSPARK_SECRET_DIRS", raising=False)
    secret = tmp_path / "pw"
    secret.write_text(CANARY)
    text = _refused({"password.file": str(secret)})
    assert "JETSPARK_SECRET_DIRS is not set" in text and "/run/secrets" in text
    # opt-in: not even the usual secret folders, which on Kubernetes and clouds hold the
    # workload's own identity tokens (the hosts of the options must not get them)
    for token in ("/var/run/secrets/eks.amazonaws.com/serviceaccount/token",
                  "/var/run/secrets/azure/tokens/azure-identity-token",
                  "/run/secrets/kubernetes.io/serviceaccount/token"):
        assert "JETSPARK_SECRET_DIRS is not set" in _refused({"password.file": token})
    # set but empty: no file at all
    assert "is empty" in _refused({"password.file": str(secret)}, environ={"JETSPARK_SECRET_DIRS": ""})


@pytest.mark.parametrize("folder", ["kubernetes.io/serviceaccount", "eks.amazonaws.com/serviceaccount",
                                    "pods.eks.amazonaws.com/serviceaccount", "azure/tokens", "tokens"])
def test_identity_tokens_under_an_allowed_folder_are_refused(folder, tmp_path, monkeypatch):
    secrets = tmp_path / "run" / "secrets"  # stands for /var/run/secrets of a pod
    (secrets / folder).mkdir(parents=True)
    token = secrets / folder / "token"
    token.write_text(CANARY)
    (secrets / "pg").write_text("pg-password")
    monkeypatch.setenv("JETSPARK_SECRET_DIRS", str(secrets))
    assert resolve_secret_references({"password.file": str(secrets / "pg")}) == {"password": "pg-password"}
    text = _refused({"password.file": str(token)})
    assert "identity tokens" in text and CANARY not in text
    # named itself, the folder is allowed: the operator chose it
    monkeypatch.setenv("JETSPARK_SECRET_DIRS", f"{secrets}:{secrets / folder}")
    assert resolve_secret_references({"password.file": str(token)}) == {"password": CANARY}


def test_a_symlink_out_of_the_allowed_directories_is_refused(secrets_dir, tmp_path):
    shadow = tmp_path / "elsewhere" / "shadow"  # stands for /etc/shadow: readable, not a secret of ours
    shadow.parent.mkdir()
    shadow.write_text(CANARY)
    link = secrets_dir / "pw"
    link.symlink_to(shadow)
    assert "outside" in _refused({"password.file": str(link)})
    assert "outside" in _refused({"password.file": str(secrets_dir / ".." / "elsewhere" / "shadow")})
    # a symlink that stays inside (a Kubernetes secret volume's ..data links) is followed
    (secrets_dir / "..data").mkdir()
    (secrets_dir / "..data" / "real").write_text(CANARY)
    inside = secrets_dir / "kube"
    inside.symlink_to(secrets_dir / "..data" / "real")
    assert resolve_secret_references({"password.file": str(inside)}) == {"password": CANARY}


def test_a_directory_is_refused(secrets_dir):
    (secrets_dir / "d").mkdir()
    assert "a directory" in _refused({"password.file": str(secrets_dir / "d")})


def test_an_oversize_file_is_refused_naming_the_option_not_the_content(secrets_dir):
    big = secrets_dir / "big"
    big.write_text(CANARY * (MAX_FILE_BYTES // len(CANARY) + 1))
    text = _refused({"kafka.sasl.jaas.config.file": str(big)})
    assert "64 KiB" in text and "kafka.sasl.jaas.config.file" in text
    big.write_text("x" * MAX_FILE_BYTES)  # the bound itself is accepted
    assert len(resolve_secret_references({"password.file": str(big)})["password"]) == MAX_FILE_BYTES


_PROBE = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # /dev/zero read whole: MemoryError, not OOM
    from jetspark.errors import OptionError
    from jetspark.secret_references import resolve_secret_references
    try:
        resolve_secret_references({"password.file": sys.argv[1]})
    except OptionError as e:
        print(e)
""")


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo"])
def test_a_device_or_fifo_is_refused_without_blocking_or_reading(kind, secrets_dir, tmp_path):
    path = kind
    if kind == "fifo":
        path = str(secrets_dir / "pipe")
        os.mkfifo(path)  # no writer: an open for reading would wait for one forever
    env = {**os.environ, "JETSPARK_SECRET_DIRS": f"{secrets_dir}:/dev"}
    done = subprocess.run([sys.executable, "-c", _PROBE, path], env=env, capture_output=True, text=True,
                          timeout=60)  # the bound: the old open() of a FIFO never returned
    assert done.returncode == 0, done.stderr
    assert "option 'password.file'" in done.stdout and "not a regular file" in done.stdout, done.stdout


def test_env_references_only_name_the_allowed_variables(monkeypatch):
    monkeypatch.setenv("HOME_TOKEN_ELSEWHERE", CANARY)
    monkeypatch.setenv("JETSPARK_SECRET_PG", CANARY)
    monkeypatch.delenv("JETSPARK_SECRET_ENV", raising=False)
    assert "JETSPARK_SECRET_*" in _refused({"password.env": "HOME_TOKEN_ELSEWHERE"})
    assert resolve_secret_references({"password.env": "JETSPARK_SECRET_PG"}) == {"password": CANARY}
    monkeypatch.setenv("JETSPARK_SECRET_ENV", "KAFKA_PASSWORD, HOME_TOKEN_*")
    assert resolve_secret_references({"password.env": "HOME_TOKEN_ELSEWHERE"}) == {"password": CANARY}
    assert "KAFKA_PASSWORD" in _refused({"password.env": "JETSPARK_SECRET_PG"})


# --- nothing is read before the unknown options are refused ----------------------------------------

@pytest.mark.parametrize("parse, raw", [
    (JdbcSinkOptions.parse, {"url": "postgresql://127.0.0.1/db", "table": "t"}),
    (KafkaSinkOptions.parse, {"topic": "t", "kafka.bootstrap.servers": "127.0.0.1:9092"}),
    (lambda raw: KafkaSourceOptions.parse(raw, streaming=True),
     {"subscribe": "t", "kafka.bootstrap.servers": "127.0.0.1:9092"}),
    (RabbitMQOptions.parse, {"url": "amqp://127.0.0.1/", "queue": "q", "walLocation": "/w"}),
], ids=["jetjdbc", "jetkafka-sink", "jetkafka-source", "jetrabbitmq"])
def test_unknown_options_are_refused_before_a_file_is_read(parse, raw, secrets_dir):
    missing = str(secrets_dir / "not-there")  # read, it would fail as "not a readable file"
    credential = "kafka.sasl.password.file" if "kafka.bootstrap.servers" in raw else "password.file"
    with pytest.raises(OptionError) as err:
        parse({**raw, credential: missing, "pasword": CANARY})
    assert err.value.option == "pasword", str(err.value)
