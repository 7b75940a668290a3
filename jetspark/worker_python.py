"""A warning, once, when Spark's Python workers would run a Python that lacks jetspark.

PySpark starts its workers with ``spark.pyspark.python``, else ``PYSPARK_PYTHON``, else
``python3`` from ``PATH`` — not the interpreter running the script. A script started as
``.venv/bin/python job.py`` without activating the venv otherwise fails later, inside a
worker, with ``ModuleNotFoundError: No module named 'pyspark_jetkafka'``.
:func:`warn_if_workers_lack_jetspark` checks that interpreter up front: one short
subprocess per interpreter and process (cached), nothing at all when it is this one.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Mapping

CONF = "spark.pyspark.python"
ENV = "PYSPARK_PYTHON"
DEFAULT = "python3"
MODULES = ("jetspark", "pyspark_jetkafka")
_PROBE = (
    "import importlib.util, sys; "
    f"missing = [m for m in {MODULES!r} if importlib.util.find_spec(m) is None]; "
    "print(', '.join(missing)); sys.exit(1 if missing else 0)"
)


class WorkerPythonWarning(UserWarning):
    """Spark's Python workers would run an interpreter that cannot import jetspark."""


def worker_python(conf_value: str | None, env: Mapping[str, str]) -> tuple[str, str]:
    """The workers' interpreter and where it comes from, in PySpark's order."""
    if conf_value:
        return conf_value, CONF
    if env.get(ENV):
        return env[ENV], ENV
    return DEFAULT, f"Spark's default ({CONF} and {ENV} unset)"


@functools.cache
def problem(executable: str) -> str | None:
    """Why ``executable`` cannot serve as jetspark's worker Python, or None when it can (or
    when this machine cannot tell: a relative path such as ``./env/bin/python`` names an
    interpreter shipped to the workers' directory)."""
    if os.sep in executable and not os.path.isabs(executable):
        return None
    found = shutil.which(executable)
    if found is None:
        return "it is not found on this machine"
    if os.path.abspath(found) == os.path.abspath(sys.executable):
        return None
    try:
        run = subprocess.run([found, "-c", _PROBE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"it could not be run ({type(e).__name__})"
    if run.returncode == 0:
        return None
    missing = run.stdout.strip() or f"exit code {run.returncode}"
    return f"it cannot import {missing}"


def _conf(spark) -> str | None:
    try:
        return spark.conf.get(CONF, None)
    except Exception:  # a conf that cannot be read: fall back to the environment
        return None


def warn_if_workers_lack_jetspark(spark) -> None:
    """Warn (once per interpreter) when the session's Python workers cannot import jetspark.

    Over Spark Connect the workers run on the server, out of this process's sight: no check.
    """
    workers = _session_workers(spark)
    if workers is not None:
        _warn_once(*workers)


def workers_can_import_jetspark(spark) -> bool:
    """False when the classic session's Python workers would run an interpreter that lacks
    jetspark (:func:`problem`, cached); True over Spark Connect (out of this process's sight)."""
    workers = _session_workers(spark)
    return workers is None or problem(workers[0]) is None


def _session_workers(spark) -> tuple[str, str] | None:
    """The classic session's workers' interpreter and its origin; None over Spark Connect."""
    if getattr(spark, "_jsc", None) is None:
        return None
    return worker_python(_conf(spark), os.environ)


@functools.cache
def _warn_once(executable: str, origin: str) -> None:
    reason = problem(executable)
    if reason is None:
        return
    warnings.warn(
        f"Spark's Python workers run {executable!r} (from {origin}), but {reason}: jetspark's "
        f"sources, sinks and windows would fail in the workers (ModuleNotFoundError). Point them at "
        f"the Python that has jetspark: set {CONF} (SparkSession.builder.config) or {ENV} before "
        f"the session starts, e.g. to {sys.executable!r} (this script's Python).",
        WorkerPythonWarning,
        stacklevel=3,
    )
