"""``jetspark services env`` prints no password: a URL's password kept in a file is read from
it when the line is evaluated; the text holds none, and evaluates to the URL itself."""

from __future__ import annotations

import subprocess

from jetspark.devtools.services.exports import export_line, shown
from jetspark.devtools.services.registry import ServiceRecord

PASSWORD = "0123abcd" * 4


def _evaluated(line: str) -> str:
    """What ``eval "$line"`` sets the variable to, in bash."""
    var = line.split()[1].split("=")[0]
    return subprocess.run(["bash", "-c", f'eval "$1"; printf %s "${var}"', "-", line],
                          check=True, capture_output=True, text=True).stdout


def test_the_amqp_line_reads_the_password_from_its_file(tmp_path):
    data = tmp_path / "it's $HOME `x` \"q\""  # a path no quoting mistake survives
    data.mkdir()
    (data / "amqp-password").write_text(PASSWORD)
    url = f"amqp://jetspark:{PASSWORD}@127.0.0.1:5672/%2F"
    line = export_line("rabbitmq", ServiceRecord("rabbitmq", url, str(data), {}))
    assert PASSWORD not in line and line.startswith('export JETSPARK_AMQP_URL="amqp://jetspark:$(cat ')
    assert _evaluated(line) == url


def test_a_password_in_no_file_is_never_printed(tmp_path):
    url = f"amqp://jetspark:{PASSWORD}@127.0.0.1:5672/%2F"
    for data in (tmp_path / "none", tmp_path):  # no file; a file holding another password
        (tmp_path / "amqp-password").write_text("other")
        line = export_line("rabbitmq", ServiceRecord("rabbitmq", url, str(data), {}))
        assert PASSWORD not in line and line.startswith("# JETSPARK_AMQP_URL not printed"), line
    assert PASSWORD not in shown(url) and "127.0.0.1:5672" in shown(url)


def test_lines_without_a_password_are_single_quoted_as_before(tmp_path):
    dsn = "postgresql://jetspark@127.0.0.1:5432/jetspark?passfile=/tmp/it's/pgpass"
    line = export_line("postgres", ServiceRecord("postgres", dsn, str(tmp_path), {}))
    assert _evaluated(line) == dsn
    assert export_line("kafka", ServiceRecord("kafka", "127.0.0.1:9092", str(tmp_path), {})) == \
        "export JETSPARK_KAFKA_BOOTSTRAP='127.0.0.1:9092'"
