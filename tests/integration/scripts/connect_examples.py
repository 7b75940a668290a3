"""Runs README examples in a Spark Connect client, for tests/integration/test_spark_connect.py.

usage: SPARK_REMOTE=sc://host:port connect_examples.py

This process is a pure Connect client (no JVM: PySpark switches a whole process to Connect
once a remote session exists, so the test process, which holds a classic session, cannot be
one). It reads one JSON request a line on stdin, ``{"name", "line", "code"}``, runs the code
with ``exec`` and answers one JSON line on stdout: ``{"printed", "error", "session"}``, where
``printed`` is what the code printed, ``error`` the traceback (None when it ran) and
``session`` the class of ``spark``. The first request is the README's session example, which
creates ``spark`` (a Connect session, because ``SPARK_REMOTE`` is set); later ones get it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback


def main() -> None:
    if not os.environ.get("SPARK_REMOTE"):
        sys.exit("SPARK_REMOTE (sc://host:port) is not set")
    answers = sys.stdout
    sys.stdout = sys.stderr  # nothing but answers on the protocol stream
    shared: dict[str, object] = {}
    for request in sys.stdin:
        req = json.loads(request)
        out = io.StringIO()
        error = None
        scope = {"__name__": f"readme_{req['name']}", **shared}
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(req["code"], f"README.md:{req['line']}:{req['name']}", "exec"), scope)
        except BaseException:
            error = traceback.format_exc()
        spark = scope.get("spark")
        if spark is not None:
            shared["spark"] = spark
            for query in spark.streams.active:  # an example that failed half-way
                query.stop()
        session = None if spark is None else f"{type(spark).__module__}.{type(spark).__name__}"
        answers.write(json.dumps({"printed": out.getvalue(), "error": error, "session": session}) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
