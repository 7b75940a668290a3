"""What deciding writer schemas cost a worker process: each writer schema id a typed ``key`` or
``value`` meets is asked of the registry and compiled once per process (its Protobuf imports
fetched with it), and that time is counted here.

PySpark's Python data source API gives a read task no metrics of its own, so each decision is
said once on the process's stderr (the executors' stderr log, as the reader's announcement is)::

    jetkafka: value writer schema id 17 (avro): usable in 0.012 s; this process: 3 writer schemas in 0.051 s

and the process's totals are :func:`writer_costs`.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class WriterCosts:
    """A process's writer schema decisions so far."""

    schemas: int = 0
    """Writer schema ids decided (usable or not): each asked of the registry and compiled once."""
    seconds: float = 0.0
    """Their time in all: the registry's answers, Protobuf imports, compiling."""


_LOCK = threading.Lock()
_TOTAL = WriterCosts()


def writer_costs() -> WriterCosts:
    """This process's totals."""
    with _LOCK:
        return _TOTAL


def count(column: str, schema_id: int, fmt: str, outcome: str, seconds: float) -> WriterCosts:
    """Count one decided writer schema id and say it on stderr; the new totals."""
    global _TOTAL
    with _LOCK:
        _TOTAL = WriterCosts(_TOTAL.schemas + 1, _TOTAL.seconds + seconds)
        total = _TOTAL
    print(f"jetkafka: {column} writer schema id {schema_id} ({fmt}): {outcome} in {seconds:.3f} s; "
          f"this process (pid {os.getpid()}): {total.schemas} writer schemas in {total.seconds:.3f} s",
          file=sys.stderr, flush=True)
    return total
