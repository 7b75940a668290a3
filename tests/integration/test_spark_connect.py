"""jetspark over Spark Connect: the README's examples, and the error when the server lacks a format.

The README's examples run unchanged against a Connect server that the test starts.

The server is PySpark's own (``spark_connect`` in tests/conftest.py), with jetspark installed
where its Python workers run. The client is a subprocess
(tests/integration/scripts/connect_examples.py) with ``SPARK_REMOTE`` set, so the README's
session example itself creates the Connect session. Every other example is prepared exactly
as in tests/integration/test_readme_examples.py (same set-ups, same substitutions) and must
print the same output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import readme
from tests.integration.test_readme_examples import EXAMPLES, Context, check_printed, prepared_code

pytestmark = pytest.mark.integration

CLIENT = Path(__file__).parent / "scripts" / "connect_examples.py"
SESSION = next(e for e in EXAMPLES if e.name == "session")


class ConnectClient:
    """The client subprocess: runs an example's code, returns what it printed."""

    def __init__(self, url: str) -> None:
        env = {**os.environ, "SPARK_REMOTE": url}
        env.pop("PYSPARK_PYTHON", None)  # the server's workers choose their Python, not the client
        self.process = subprocess.Popen([sys.executable, str(CLIENT)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=env)

    def run(self, example: readme.Example, code: str) -> dict:
        assert self.process.stdin is not None and self.process.stdout is not None
        request = {"name": example.name, "line": example.line, "code": code}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer, f"the Connect client exited (code {self.process.wait()}); its stderr is above"
        return json.loads(answer)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=120)


@pytest.fixture(scope="module")
def connect_client(spark_connect: str) -> Iterator[ConnectClient]:
    """One client for the module, its ``spark`` made by the README's session example."""
    client = ConnectClient(spark_connect)
    try:
        answer = client.run(SESSION, SESSION.code)
        assert answer["error"] is None, answer["error"]
        assert answer["session"] == "pyspark.sql.connect.session.SparkSession", answer["session"]
        yield client
    finally:
        client.close()


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e.name != "session"], ids=lambda e: e.name)
def test_readme_example_over_connect(example: readme.Example, connect_client: ConnectClient, kafka_bootstrap,
                                     kafka_topic, pg_dsn, pg_schema, amqp_url, rabbit_queue, tmp_path: Path):
    ctx = Context(kafka_bootstrap, kafka_topic, amqp_url, rabbit_queue)
    answer = connect_client.run(example, prepared_code(example, ctx, pg_dsn, pg_schema, tmp_path))
    assert answer["error"] is None, f"{example.name} over Spark Connect:\n{answer['error']}"
    check_printed(example, answer["printed"])


CLIENT_ONLY_FORMAT = """
from pyspark.sql.datasource import DataSource


class ClientOnly(DataSource):
    @classmethod
    def name(cls):
        return "jetclientonly"

    def schema(self):
        return "x int"
"""


def test_a_format_the_server_cannot_import_fails_at_the_call_saying_why(connect_client: ConnectClient,
                                                                       tmp_path: Path):
    """As jetspark's formats on a server without jetspark: a module only the client has. The
    server does not know the format; registering it from the client ships a reference the
    server cannot import; read_stream says so, naming the format and the fix."""
    (tmp_path / "client_only_format.py").write_text(CLIENT_ONLY_FORMAT)
    code = f"""
import sys
sys.path.insert(0, {str(tmp_path)!r})
from client_only_format import ClientOnly

from jetspark.datasources.stream import read_stream
from jetspark.errors import SparkConnectError

try:
    read_stream(spark, ClientOnly, {{}}, None)
except SparkConnectError as e:
    print(e)
"""
    answer = connect_client.run(readme.Example("client-only-format", code, None, 0), code)
    assert answer["error"] is None, answer["error"]
    printed = answer["printed"]
    assert "cannot run the format 'jetclientonly'" in printed, printed
    assert "jetspark is not installed where the server runs its Python workers" in printed, printed


def test_static_windows_count_null_event_times_into_a_connect_observation(connect_client: ConnectClient):
    """``observation=Observation(...)`` of a static window_aggregate: over Connect PySpark makes
    it a Connect observation, which window_aggregate fills as in a classic session."""
    code = """
from pyspark.sql import Observation, functions as F

from jetspark.windowing import ops, tumbling, window_aggregate

df = spark.createDataFrame(
    [("a", "2026-01-01 00:00:01"), ("a", None), ("b", "2026-01-01 00:00:07"), ("b", "2026-01-01 00:00:08")],
    "k string, t string").select("k", F.to_timestamp("t").alias("ts"))
null_times = Observation("null_times")
for engine in ("auto", "python"):
    windows = window_aggregate(df, key="k", time="ts", window=tumbling("5 seconds"),
                               aggs={"n": ops.count()}, engine=engine, observation=null_times)
    print(engine, sorted((r.k, r.n) for r in windows.collect()), null_times.get["rows"])
    null_times = Observation("null_times_python")
"""
    answer = connect_client.run(readme.Example("observation", code, None, 0), code)
    assert answer["error"] is None, answer["error"]
    assert answer["printed"].splitlines() == ["auto [('a', 1), ('b', 2)] 1", "python [('a', 1), ('b', 2)] 1"]


def test_a_stream_over_connect_only_warns_about_spark_default_partitions(connect_client: ConnectClient):
    """A Connect client cannot tell Spark's default from a chosen 200: a streaming window warns
    for both, Spark's default (unset) and 200 set by the client, and leaves the server
    session's setting as it is; a value other than 200 is kept without a warning."""
    code = """
import warnings

from jetspark.windowing import StatefulPartitionsWarning, ops, tumbling, window_aggregate

kept = spark.conf.get("spark.sql.shuffle.partitions")
src = spark.readStream.format("rate").load().withWatermark("timestamp", "1 second")
for value in (None, "200"):
    if value is None:
        spark.conf.unset("spark.sql.shuffle.partitions")
    else:
        spark.conf.set("spark.sql.shuffle.partitions", value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        window_aggregate(src, key="value", time="timestamp", window=tumbling("1 second"),
                         aggs={"n": ops.count()})
    warned = sum(issubclass(w.category, StatefulPartitionsWarning) for w in caught)
    print(warned, spark.conf.get("spark.sql.shuffle.partitions"))
spark.conf.set("spark.sql.shuffle.partitions", "3")
with warnings.catch_warnings():
    warnings.simplefilter("error", StatefulPartitionsWarning)
    window_aggregate(src, key="value", time="timestamp", window=tumbling("1 second"), aggs={"n": ops.count()})
spark.conf.set("spark.sql.shuffle.partitions", kept)
"""
    answer = connect_client.run(readme.Example("connect-partitions", code, None, 0), code)
    assert answer["error"] is None, answer["error"]
    assert answer["printed"].splitlines() == ["1 200", "1 200"]
