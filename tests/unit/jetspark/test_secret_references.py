"""Credentials given as ``X.file`` / ``X.env``: read once, seen as ``X``, never shown."""

from __future__ import annotations

import pytest

from jetspark.errors import OptionError
from jetspark.options import Options
from jetspark.secret_references import resolve_secret_references
from sinks.jdbc.options import JdbcSinkOptions

CANARY = "c4n4ry-s3cret"


def test_file_reference_reads_the_value_without_its_trailing_newline(tmp_path):
    secret = tmp_path / "pw"
    secret.write_text(CANARY + "\n")
    got = resolve_secret_references({"url": "postgresql://db/x", "password.file": str(secret)})
    assert got == {"url": "postgresql://db/x", "password": CANARY}


def test_env_reference_and_any_case(monkeypatch):
    monkeypatch.setenv("JETSPARK_TEST_SASL", CANARY)
    opts = Options({"Kafka.SASL.Password.ENV": "JETSPARK_TEST_SASL"})
    assert opts.with_prefix("kafka.") == {"SASL.Password": CANARY}


def test_a_value_with_inner_newlines_is_kept_whole(tmp_path):
    jaas = tmp_path / "jaas"
    jaas.write_text('org.apache.kafka.common.security.plain.PlainLoginModule required\n  username="u";\n')
    got = resolve_secret_references({"kafka.sasl.jaas.config.file": str(jaas)})
    assert got["kafka.sasl.jaas.config"].endswith('username="u";')
    assert "\n  username" in got["kafka.sasl.jaas.config"]


@pytest.mark.parametrize("raw, words", [
    ({"password": "x", "password.file": "/p"}, "either password or password.file"),
    ({"password.env": "A", "PASSWORD.file": "/p"}, "not both"),
    ({"kafka.bootstrap.servers.file": "/p"}, "only a credential option"),
    ({"password.env": "JETSPARK_NO_SUCH_VARIABLE"}, "environment variable"),
    ({"password.file": "/nonexistent/jetspark/pw"}, "readable UTF-8 file"),
])
def test_misuse_names_the_option_and_what_is_accepted(raw, words):
    with pytest.raises(OptionError) as err:
        resolve_secret_references(raw)
    assert words in str(err.value)
    assert any(k in str(err.value) for k in raw)


def test_a_reference_never_shows_its_target_or_value(tmp_path):
    secret = tmp_path / CANARY
    with pytest.raises(OptionError) as err:
        resolve_secret_references({"password.file": str(secret)})
    assert CANARY not in str(err.value)


def test_a_format_sees_the_value_and_hides_it(tmp_path):
    secret = tmp_path / "pw"
    secret.write_text(CANARY)
    o = JdbcSinkOptions.parse({"url": "postgresql://127.0.0.1/db", "table": "t",
                               "password.file": str(secret)})
    assert o.password == CANARY
    assert CANARY not in repr(o)
    assert CANARY in o.secrets()
