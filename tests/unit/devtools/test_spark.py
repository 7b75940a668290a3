"""``output_to_log``: where the demo sends Spark's output; ``local_session`` and Connect URLs.

No Spark needed.
"""

from __future__ import annotations

import logging
import subprocess
import warnings

import pytest

from jetspark.devtools.spark import local_session, output_to_log
from jetspark.errors import SparkConnectError


def test_stderr_of_children_warnings_and_loggers_go_to_the_file_stdout_stays(tmp_path, capfd):
    with output_to_log(tmp_path / "logs" / "spark.log") as log:
        subprocess.run(["sh", "-c", "echo 'WARN from a child process' >&2"], check=True)  # as the JVM
        warnings.warn("a Python warning", UserWarning, stacklevel=1)
        logging.getLogger("pyspark.test").warning("a pyspark logger")
        print("the demo's line", flush=True)
    logging.getLogger("pyspark.test").warning("after: not in the file")
    subprocess.run(["sh", "-c", "echo 'stderr again' >&2"], check=True)
    out, err = capfd.readouterr()
    assert out == "the demo's line\n"
    assert "WARN from a child process" not in err and "a Python warning" not in err
    assert "stderr again" in err  # file descriptor 2 is restored
    text = log.read_text()
    assert "WARN from a child process" in text
    assert "UserWarning: a Python warning" in text
    assert "WARNING pyspark.test: a pyspark logger" in text
    assert "after: not in the file" not in text


def test_an_error_inside_names_the_log_on_the_restored_stderr(tmp_path, capfd):
    with pytest.raises(RuntimeError), output_to_log(tmp_path / "spark.log"):
        raise RuntimeError("query failed")
    assert f"(Spark's log: {tmp_path / 'spark.log'})" in capfd.readouterr().err


def test_local_session_refuses_a_spark_connect_url_saying_what_to_use():
    with pytest.raises(SparkConnectError, match=r"'sc://127.0.0.1:15002' is a Spark Connect server.*"
                                                r"SparkSession.builder.remote\(url\)"):
        local_session("jetspark-demo", master="sc://127.0.0.1:15002")


def test_the_demo_refuses_a_spark_connect_master_before_starting_any_service(capsys, monkeypatch):
    from jetspark.devtools import cli, services

    def no_services(*args, **kwargs):
        raise AssertionError("services started for a demo that cannot run")

    monkeypatch.setattr(services, "acquire", no_services)
    assert cli.main(["demo", "--master", "sc://127.0.0.1:15002"]) == 1
    assert "is a Spark Connect server" in capsys.readouterr().err
