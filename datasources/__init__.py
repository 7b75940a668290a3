"""jetspark.datasources: jetkafka (:mod:`.kafka`) and jetrabbitmq (:mod:`.rabbitmq`), and what
both share (watermarks, their options, the stream helpers).

``read_kafka_stream`` and ``read_rabbitmq_stream`` are importable from here (and from
``jetspark``). Type checkers see them through the ``TYPE_CHECKING`` imports; at run time each
is imported on first use (PEP 562 ``__getattr__``), so importing one source does not import
the other (nor pyspark) eagerly.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jetspark.datasources.kafka.stream import read_kafka_stream
    from jetspark.datasources.rabbitmq.stream import read_rabbitmq_stream

_LAZY = {
    "read_kafka_stream": "jetspark.datasources.kafka.stream",
    "read_rabbitmq_stream": "jetspark.datasources.rabbitmq.stream",
}

__all__ = ["read_kafka_stream", "read_rabbitmq_stream"]


def __getattr__(name: str) -> object:
    """Import ``read_kafka_stream`` or ``read_rabbitmq_stream`` on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'jetspark.datasources' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
