"""jetspark.connect: the format check over Spark Connect (fake sessions; the real server is in
tests/integration/test_spark_connect.py)."""

from __future__ import annotations

import pytest

from jetspark.connect import NOT_FOUND, is_connect, resolved_on_server
from jetspark.errors import JetsparkError, SparkConnectError


class _SparkError(Exception):
    def __init__(self, condition: str) -> None:
        super().__init__(condition)
        self.condition = condition

    def getCondition(self) -> str:  # PySpark's name
        return self.condition


class _Frame:
    def __init__(self, error: Exception | None) -> None:
        self.error = error

    @property
    def schema(self):
        if self.error is not None:
            raise self.error
        return "x int"


class _Session:
    def __init__(self, *errors: Exception | None) -> None:
        self.errors = list(errors)
        self.registered: list[type] = []
        self.dataSource = self

    def register(self, source: type) -> None:
        self.registered.append(source)

    def load(self) -> _Frame:
        return _Frame(self.errors.pop(0))


class Source:
    @classmethod
    def name(cls) -> str:
        return "jetkafka"


def test_a_connect_session_is_told_apart_by_its_class():
    connect_session = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})
    classic_session = type("SparkSession", (), {"__module__": "pyspark.sql.session"})
    assert is_connect(connect_session()) and not is_connect(classic_session())


def test_a_format_the_server_knows_is_not_registered_again():
    spark = _Session(None)
    assert resolved_on_server(spark, Source, spark.load).schema == "x int"
    assert spark.registered == []


def test_a_format_the_server_does_not_know_is_registered_from_the_client():
    spark = _Session(_SparkError(NOT_FOUND), None)
    assert resolved_on_server(spark, Source, spark.load).schema == "x int"
    assert spark.registered == [Source]


def test_a_server_without_jetspark_fails_naming_the_format_and_the_fix():
    cause = _SparkError("PYTHON_DATA_SOURCE_ERROR")
    spark = _Session(_SparkError(NOT_FOUND), cause)
    with pytest.raises(SparkConnectError) as caught:
        resolved_on_server(spark, Source, spark.load)
    assert isinstance(caught.value, JetsparkError) and caught.value.__cause__ is cause
    text = str(caught.value)
    assert "cannot run the format 'jetkafka'" in text and "Install jetspark" in text


def test_other_errors_pass_through_unchanged():
    error = _SparkError("UNRESOLVED_COLUMN")
    spark = _Session(error)
    with pytest.raises(_SparkError) as caught:
        resolved_on_server(spark, Source, spark.load)
    assert caught.value is error and spark.registered == []
