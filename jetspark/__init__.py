"""jetspark: Hazelcast Jet's stream-processing ideas on Spark Structured Streaming.

Subpackages: ``jetspark.datasources`` (jetkafka, jetrabbitmq, watermarks),
``jetspark.sinks`` (jdbc, kafka), ``jetspark.windowing`` (frame windowing), ``jetspark.inspect``;
``jetspark.devtools`` is development tooling (local services, the demo, the CLI), not the library.

The public API is importable from here: ``from jetspark import window_aggregate, sliding,
tumbling, session, ops, read_kafka_stream, read_rabbitmq_stream``, and the errors
(``JetsparkError``, ``OptionError``, ``jetspark_error_of``, ``is_jetspark_error``). Type
checkers and IDEs see every name through the ``TYPE_CHECKING`` imports below; at run time the
windowing and stream helpers are imported on first use (PEP 562 ``__getattr__``), so
``import jetspark`` stays light (it does not import pyspark, pyarrow or numpy): Spark's Python
workers import ``jetspark`` for every task.
"""

from importlib import import_module as _import_module
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from jetspark.errors import JetsparkError, OptionError, is_jetspark_error, jetspark_error_of

if TYPE_CHECKING:  # the same names as _LAZY below, for type checkers and IDEs
    from jetspark.datasources.kafka.stream import read_kafka_stream
    from jetspark.datasources.rabbitmq.stream import read_rabbitmq_stream
    from jetspark.windowing import ops, session, sliding, tumbling, window_aggregate

__version__: str  # an annotation only: __getattr__ reads it on first use

#: Public name → the module it is imported from on first use.
_LAZY = {
    "read_kafka_stream": "jetspark.datasources.kafka.stream",
    "read_rabbitmq_stream": "jetspark.datasources.rabbitmq.stream",
    "ops": "jetspark.windowing",
    "session": "jetspark.windowing",
    "sliding": "jetspark.windowing",
    "tumbling": "jetspark.windowing",
    "window_aggregate": "jetspark.windowing",
}

__all__ = [
    "JetsparkError",
    "OptionError",
    "__version__",
    "is_jetspark_error",
    "jetspark_error_of",
    "ops",
    "read_kafka_stream",
    "read_rabbitmq_stream",
    "session",
    "sliding",
    "tumbling",
    "window_aggregate",
]


def __getattr__(name: str) -> object:
    """Import a public name of :data:`_LAZY` on first use (then it is a plain attribute)."""
    if name == "__version__":  # read on first use: the metadata lookup costs each worker ~30 ms
        globals()[name] = _installed_version()
        return globals()[name]
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'jetspark' has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def _installed_version() -> str:
    """One version source: pyproject.toml's, as installed."""
    try:
        return _version("jetspark")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "0+unknown"
