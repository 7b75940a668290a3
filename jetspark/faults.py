"""Named fault-injection points: SIGKILL the whole driver at a chosen point.

Library code marks crash-relevant moments with ``point("sink.after_prepare")``. A test
runs a query in a subprocess with ``JETSPARK_FAULT=<name>[@<n>]`` (and
``JETSPARK_FAULT_STATE=<file>``); when the point is reached for the n-th time (default
1st), the process group — the driver JVM, its Python workers, the script — is killed with
SIGKILL, as a crashed machine would be. Hits are counted across processes in the state
file. Without ``JETSPARK_FAULT`` a point costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

ENV_POINT = "JETSPARK_FAULT"
ENV_STATE = "JETSPARK_FAULT_STATE"


def point(name: str) -> None:
    """Crash here when ``JETSPARK_FAULT`` names this point and its hit count is reached."""
    spec = os.environ.get(ENV_POINT)
    if not spec:
        return
    target, _, nth = spec.partition("@")
    if target != name:
        return
    wanted = int(nth) if nth else 1
    state = os.environ.get(ENV_STATE)
    hits = 1
    if state:
        fd = os.open(state, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, b".")
        finally:
            os.close(fd)
        hits = os.path.getsize(state)
    if hits == wanted:
        os.killpg(os.getpgrp(), signal.SIGKILL)
