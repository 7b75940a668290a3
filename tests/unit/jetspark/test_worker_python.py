"""The warning when Spark's Python workers would run an interpreter without jetspark."""

from __future__ import annotations

import sys
import warnings
from types import SimpleNamespace

import pytest

from jetspark import worker_python
from jetspark.worker_python import WorkerPythonWarning, warn_if_workers_lack_jetspark


@pytest.fixture(autouse=True)
def _fresh_cache():
    worker_python.problem.cache_clear()
    worker_python._warn_once.cache_clear()
    yield
    worker_python.problem.cache_clear()
    worker_python._warn_once.cache_clear()


def _interpreter(tmp_path, name: str, *flags: str) -> str:
    """A wrapper around this Python (``-I -S``: without site-packages, so without jetspark)."""
    path = tmp_path / name
    path.write_text(f'#!/bin/sh\nexec {sys.executable} {" ".join(flags)} "$@"\n')
    path.chmod(0o755)
    return str(path)


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default=None):
        return self.values.get(key, default)


def _session(conf: dict[str, str]):
    return SimpleNamespace(conf=_Conf(conf), _jsc=object())


def test_worker_python_follows_pysparks_order():
    assert worker_python.worker_python("/a/python", {"PYSPARK_PYTHON": "/b/python"}) == (
        "/a/python", "spark.pyspark.python")
    env_only = worker_python.worker_python(None, {"PYSPARK_PYTHON": "/b/python"})
    assert env_only == ("/b/python", "PYSPARK_PYTHON")
    exe, origin = worker_python.worker_python(None, {})
    assert exe == "python3" and "unset" in origin


def test_this_interpreter_and_one_with_jetspark_pass(tmp_path):
    assert worker_python.problem(sys.executable) is None
    assert worker_python.problem(_interpreter(tmp_path, "same")) is None


def test_an_interpreter_without_jetspark_is_named(tmp_path):
    reason = worker_python.problem(_interpreter(tmp_path, "bare", "-I", "-S"))
    assert reason == "it cannot import jetspark, pyspark_jetkafka"


def test_a_missing_interpreter_is_reported_and_a_shipped_one_is_not_judged():
    assert worker_python.problem("no-such-python-jetspark") == "it is not found on this machine"
    assert worker_python.problem("./env/bin/python") is None


def test_warns_once_naming_the_setting_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    bare = _interpreter(tmp_path, "bare", "-I", "-S")
    spark = _session({"spark.pyspark.python": bare})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_if_workers_lack_jetspark(spark)
        warn_if_workers_lack_jetspark(spark)
    assert [w.category for w in caught] == [WorkerPythonWarning]
    message = str(caught[0].message)
    assert bare in message and "spark.pyspark.python" in message and "PYSPARK_PYTHON" in message
    assert "cannot import jetspark" in message and sys.executable in message


def test_no_warning_for_a_good_interpreter_or_over_spark_connect(tmp_path, monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    bare = _interpreter(tmp_path, "bare", "-I", "-S")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_if_workers_lack_jetspark(_session({}))
        warn_if_workers_lack_jetspark(SimpleNamespace(conf=_Conf({"spark.pyspark.python": bare})))
    assert caught == []


def test_whether_the_workers_can_import_jetspark_follows_the_same_check(tmp_path, monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    bare = _interpreter(tmp_path, "bare", "-I", "-S")
    assert not worker_python.workers_can_import_jetspark(_session({"spark.pyspark.python": bare}))
    assert worker_python.workers_can_import_jetspark(_session({"spark.pyspark.python": sys.executable}))
    connect = SimpleNamespace(conf=_Conf({"spark.pyspark.python": bare}))  # no _jsc: out of sight
    assert worker_python.workers_can_import_jetspark(connect)
