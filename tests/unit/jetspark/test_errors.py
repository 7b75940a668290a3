"""jetspark's errors: stable conditions, and finding a jetspark error inside the text of the
exception Spark raises for it (pure logic; tests/integration/test_jetspark_errors.py does it
through a real Spark)."""

from __future__ import annotations

import pytest

from jetspark.errors import (
    UNKNOWN_NOT_SHOWN,
    JetsparkError,
    OptionError,
    ServiceError,
    SparkConnectError,
    is_jetspark_error,
    jetspark_error_of,
)
from jetspark.windowing import AggregateError, WindowDefinitionError


def _wrapped(error: Exception, after: str = "\n SQLSTATE: 38000") -> str:
    """The message Spark gives a Python data source's error: its traceback, then more."""
    return ("[PYTHON_DATA_SOURCE_ERROR] Failed to initialize Python data source reader: "
            "Traceback (most recent call last):\n  File \"/x/options.py\", line 93, in reject_unknown\n"
            "    raise OptionError(orig, UNKNOWN_NOT_SHOWN, accepted)\n"
            f"{type(error).__module__}.{type(error).__qualname__}: {error}{after}")


def test_every_error_has_a_stable_condition_from_its_class_name() -> None:
    assert JetsparkError().code == "JETSPARK_ERROR"
    assert OptionError("a", 1, "b").getCondition() == "JETSPARK_OPTION_ERROR"
    assert SparkConnectError.code == "JETSPARK_SPARK_CONNECT_ERROR"
    assert WindowDefinitionError.code == "JETSPARK_WINDOW_DEFINITION_ERROR"
    assert AggregateError.code == "JETSPARK_AGGREGATE_ERROR"


def test_an_option_error_in_sparks_message_comes_back_with_its_class_and_fields() -> None:
    original = OptionError("watermark.lag", "ten s", "a duration such as '10 seconds'")
    spark_error = RuntimeError(_wrapped(original))
    err = jetspark_error_of(spark_error)
    assert type(err) is OptionError and err.code == "JETSPARK_OPTION_ERROR"
    assert str(err) == str(original)
    assert (err.option, err.value) == ("watermark.lag", "ten s")
    assert err.accepted == "a duration such as '10 seconds'"
    assert err.spark_exception is spark_error
    assert is_jetspark_error(spark_error, OptionError) and is_jetspark_error(spark_error)
    assert jetspark_error_of(spark_error, ServiceError) is None


def test_an_unknown_options_value_stays_hidden_and_a_later_spark_error_does_not_hide_it() -> None:
    original = OptionError("pasword", UNKNOWN_NOT_SHOWN, "one of: password")
    text = _wrapped(original, "\n\nDuring handling of the above exception, another exception occurred:\n\n"
                              "Traceback (most recent call last):\nUnboundLocalError: reader")
    err = jetspark_error_of(Exception(text))
    assert err is not None and err.option == "pasword" and err.value == "***"


def test_a_multi_line_message_and_an_error_class_of_another_module() -> None:
    original = WindowDefinitionError("window size 25 seconds\nmust be a multiple")
    err = jetspark_error_of(Exception(_wrapped(original, "\n\tat org.apache.spark.Foo(Foo.scala:1)")))
    assert type(err) is WindowDefinitionError and str(err) == "window size 25 seconds\nmust be a multiple"


def test_the_error_itself_or_its_cause_is_returned_as_it_is() -> None:
    original = OptionError("a", 1, "b")
    assert jetspark_error_of(original) is original
    try:
        try:
            raise original
        except OptionError as e:
            raise RuntimeError("wrapped") from e
    except RuntimeError as e:
        assert jetspark_error_of(e) is original


@pytest.mark.parametrize("text", [
    "ValueError: option 'x'",  # not jetspark's
    "  jetspark.errors.OptionError: indented, a line of code",
    "jetspark.errors.UNKNOWN_NOT_SHOWN: not an error class",
    "jetspark.redaction.REDACTED: not a class",
])
def test_other_errors_are_not_jetsparks(text: str) -> None:
    assert jetspark_error_of(Exception(text)) is None
    assert not is_jetspark_error(Exception(text))
    assert jetspark_error_of(None) is None


def test_a_class_this_process_cannot_import_is_a_jetspark_error() -> None:
    err = jetspark_error_of(Exception("x\njetspark.no_such_module.FutureError: later\n"))
    assert type(err) is JetsparkError and str(err) == "later"
