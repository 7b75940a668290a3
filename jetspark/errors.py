"""The one root exception type of jetspark, its direct subclasses, and how to find a jetspark
error inside the exception Spark raised for it.

An error a jetspark data source raises while Spark plans or runs a query reaches the user's
code wrapped by Spark (``AnalysisException``, ``PythonException``, ``StreamingQueryException``,
over Spark Connect their Connect forms), so ``except OptionError`` does not fire there.
:func:`jetspark_error_of` finds it: the wrapped error's traceback names its class
(``jetspark.errors.OptionError: option 'bogus': …``), from which it rebuilds an instance of
that class. Every jetspark error has a stable condition, :attr:`JetsparkError.code`
(``JETSPARK_OPTION_ERROR``), also returned by ``getCondition()`` as PySpark's errors do::

    from jetspark.errors import OptionError, jetspark_error_of

    try:
        query.awaitTermination()
    except Exception as e:
        err = jetspark_error_of(e)
        if isinstance(err, OptionError):
            print("fix option", err.option, "accepted:", err.accepted)
        raise
"""

from __future__ import annotations

import importlib
import re

from jetspark.redaction import REDACTED, shown_value

UNKNOWN_NOT_SHOWN = object()
"""The value of an option jetspark does not know: never shown (it may be a misspelt credential)."""


class JetsparkError(Exception):
    """Root of every error jetspark raises on purpose.

    Attributes
    ----------
    code : str
        The error's condition, stable across releases: ``JETSPARK_`` and the class name in
        upper snake case (``OptionError`` → ``JETSPARK_OPTION_ERROR``); the root's is
        ``JETSPARK_ERROR``.
    spark_exception : BaseException or None
        For an error [`jetspark_error_of`][jetspark.errors.jetspark_error_of] rebuilt from
        Spark's wrapping: the exception
        Spark raised. None for an error raised directly.
    """

    code: str = "JETSPARK_ERROR"
    spark_exception: BaseException | None = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "code" not in cls.__dict__:
            cls.code = "JETSPARK_" + re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", cls.__name__).upper()

    def getCondition(self) -> str:  # PySpark's name (PySparkException)
        """The error's condition, ``code`` (as PySpark's errors' ``getCondition()``)."""
        return self.code

    @classmethod
    def _rebuilt(cls, message: str) -> JetsparkError:
        """An instance with this message, without calling ``__init__`` (whose arguments a
        wrapped error's text does not keep); subclasses restore their attributes from it."""
        err = cls.__new__(cls)
        Exception.__init__(err, message)
        return err


class OptionError(JetsparkError, ValueError):
    """An option is unknown, missing or malformed.

    The message names the option, the value given and what is accepted. The value is
    shown as ``jetspark.redaction.shown_value`` allows (``***`` for a credential, no
    value for an unknown option); the exception keeps only that shown form.
    """

    def __init__(self, option: str, value: object, accepted: str) -> None:
        self.option = option
        self.accepted = accepted
        if value is UNKNOWN_NOT_SHOWN:
            self.value: object = REDACTED
            got = "a value (not shown: an unknown option may be a misspelt credential)"
        else:
            self.value = shown_value(option, value)
            got = repr(self.value)
        super().__init__(f"option {option!r}: got {got}; accepted: {accepted}")

    @classmethod
    def _rebuilt(cls, message: str) -> JetsparkError:
        err = super()._rebuilt(message)
        m = _OPTION_MESSAGE.match(message)
        err.option, err.value, err.accepted = (None, None, None) if m is None else (
            _literal(m["option"]), _shown(m["got"]), m["accepted"])
        return err


class ServiceError(JetsparkError, RuntimeError):
    """A backing service (Kafka, PostgreSQL, RabbitMQ) could not be started or reached."""


class SparkConnectError(JetsparkError, RuntimeError):
    """Something jetspark needs is not available over Spark Connect; the message says why and
    what to do instead (docs/how-to/spark-connect.md)."""


# ---------------------------------------------------------------------------------------------
# Finding a jetspark error inside Spark's wrapping
# ---------------------------------------------------------------------------------------------

#: How Python's traceback names an exception: ``<module>.<class>: <message>`` at a line's start
#: (the line Spark copies into its own error's message).
_RAISED = re.compile(r"^(?P<module>jetspark(?:\.\w+)*)\.(?P<name>[A-Za-z_]\w*)(?:: (?P<message>.*))?$", re.M)
#: Where a wrapped message ends: a blank line, Spark's SQLSTATE line or a JVM stack frame.
_END = re.compile(r"^(?:\s*$|\s*SQLSTATE: |\tat |Traceback \(most recent call last\))")
_OPTION_MESSAGE = re.compile(r"option (?P<option>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"): "
                             r"got (?P<got>.*?); accepted: (?P<accepted>.*)\Z", re.S)


def _literal(text: str) -> object:
    import ast  # only when an error is rebuilt: `import jetspark` stays light

    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _shown(got: str) -> object:
    return REDACTED if got.startswith("a value (not shown") else _literal(got)


def _error_class(module: str, name: str) -> type[JetsparkError] | None:
    """The jetspark error class a traceback names, or None (not a JetsparkError)."""
    try:
        cls = getattr(importlib.import_module(module), name, None)
    except ImportError:  # a module of another jetspark version, or not installed here
        return JetsparkError
    return cls if isinstance(cls, type) and issubclass(cls, JetsparkError) else None


def _wrapped_text(exc: BaseException) -> str:
    text = str(exc)
    params = getattr(exc, "getMessageParameters", None)  # PySpark: the Python traceback, unabridged
    if callable(params):
        try:
            text += "\n" + "\n".join(str(v) for v in (params() or {}).values())
        except Exception:  # a Connect error without them
            pass
    return text


def _from_text(text: str) -> tuple[type[JetsparkError], str] | None:
    """The last jetspark error a (traceback) text names: its class and message."""
    found = None
    for m in _RAISED.finditer(text):
        cls = _error_class(m["module"], m["name"])
        if cls is None:
            continue
        lines = [m["message"] or ""]
        for line in text[m.end():].split("\n")[1:]:
            if _END.match(line):
                break
            lines.append(line)
        found = cls, "\n".join(lines)
    return found


def jetspark_error_of(
    exc: BaseException | None, cls: type[JetsparkError] = JetsparkError
) -> JetsparkError | None:
    """The jetspark error that ``exc`` is, was caused by, or wraps, or None.

    Parameters
    ----------
    exc : BaseException or None
        What the user's code caught: a jetspark error itself, an exception whose
        ``__cause__``/``__context__`` chain holds one, or an exception Spark raised for one
        (``AnalysisException``, ``PythonException``, ``StreamingQueryException``, their
        Spark Connect forms; e.g. ``query.exception()``), whose message carries the Python
        traceback naming the jetspark error's class.
    cls : type of JetsparkError, default JetsparkError
        Only an error of this class (or a subclass) counts.

    Returns
    -------
    JetsparkError or None
        The error itself when ``exc`` is (or was caused by) one; otherwise an instance of the
        named class rebuilt from the wrapped message: ``str(err)`` is the original message,
        ``err.code`` its condition, ``err.spark_exception`` is ``exc``, and an
        [`OptionError`][jetspark.errors.OptionError] has ``option``, ``value`` (as shown) and
        ``accepted`` back.
        A class the traceback names that this process cannot import is rebuilt as
        [`JetsparkError`][jetspark.errors.JetsparkError]. None when no jetspark error of ``cls`` is found.

    Examples
    --------
    >>> try:
    ...     spark.read.format("jetkafka").option("bogus", "1").load().collect()
    ... except Exception as e:
    ...     err = jetspark_error_of(e, OptionError)
    ...     if err is None:
    ...         raise
    ...     print(err.code, err.option)
    JETSPARK_OPTION_ERROR bogus
    """
    seen: set[int] = set()
    chain = exc
    while chain is not None and id(chain) not in seen:  # the error itself, or its causes
        seen.add(id(chain))
        if isinstance(chain, cls):
            return chain
        chain = chain.__cause__ or chain.__context__
    chain = exc
    seen.clear()
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        found = _from_text(_wrapped_text(chain))
        if found is not None and issubclass(found[0], cls):
            err = found[0]._rebuilt(found[1])
            err.spark_exception = exc
            return err
        chain = chain.__cause__ or chain.__context__
    return None


def is_jetspark_error(exc: BaseException | None, cls: type[JetsparkError] = JetsparkError) -> bool:
    """Whether ``exc`` is, or wraps, a jetspark error of ``cls``: see
    [`jetspark_error_of`][jetspark.errors.jetspark_error_of].

    Parameters
    ----------
    exc : BaseException or None
        The exception caught (or ``query.exception()``).
    cls : type of JetsparkError, default JetsparkError
        The jetspark error class to look for, e.g. [`OptionError`][jetspark.errors.OptionError].

    Returns
    -------
    bool
        True when [`jetspark_error_of`][jetspark.errors.jetspark_error_of] finds one.
    """
    return jetspark_error_of(exc, cls) is not None
