"""Every ```python block of the documentation runs, against the real services, and prints what
it says: README.md and every page under docs/ (see :mod:`tests.readme` for the markers).

Each example runs with ``exec`` in the test session's Spark (``spark`` is predefined, as the
pages' first example creates it), so a broken API breaks this test. The examples make their own
input with :mod:`jetspark.examples` (as a reader runs them), and read their endpoints from the
``JETSPARK_*`` variables that ``jetspark services env`` prints. Before an example runs:

- ``os.environ["JETSPARK_KAFKA_BOOTSTRAP"]`` (and ``_PG_DSN``, ``_AMQP_URL``) become this
  session's endpoints, written as literals (the same code then runs over Spark Connect, in a
  client process of its own);
- ``/tmp/checkpoints/`` and ``os.path.expanduser("~/…")`` become a fresh temporary directory,
  the ``public.`` schema a fresh PostgreSQL schema, and the quoted names of topics and queues
  (:data:`TOPICS`, ``"orders"``) unique ones, created empty (topics: 2 partitions for
  ``positions`` and 1 for the others, without time retention; the queue durable).
  tests/integration/test_docs_reading_order.py runs them on the names as printed instead.

Output: when the page has an ``<!-- expected output -->`` block after the example, what the
example prints must equal it line by line; examples also ``assert`` themselves.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import readme

pytestmark = pytest.mark.integration

ENV_KAFKA = 'os.environ["JETSPARK_KAFKA_BOOTSTRAP"]'
ENV_PG = 'os.environ["JETSPARK_PG_DSN"]'
ENV_AMQP = 'os.environ["JETSPARK_AMQP_URL"]'
DOC_CHECKPOINTS = "/tmp/checkpoints/"
DOC_HOME = 'os.path.expanduser("~/'
DOC_SCHEMA = "public."
_HOST_PORT = re.compile(r"(?:localhost|\d+\.\d+\.\d+\.\d+):\d+")

EXAMPLES = readme.examples()


@dataclass
class Context:
    """What a set-up may use: the session's services and fixtures."""

    kafka_bootstrap: str
    kafka_topic: Callable[..., str]
    amqp_url: str
    rabbit_queue: str


TOPICS = {"positions": 2, "speeding": 1, "avro-positions": 1, "avro-sink-positions": 1,
          "json-schema-positions": 1, "protobuf-positions": 1, "work-items": 2}
"""The pages' topics and their partitions (each page writes to topics of its own)."""


def _names(code: str, ctx: Context) -> dict[str, str]:
    """Unique, empty topics and queue for the quoted names the example uses."""
    out = {}
    for topic, partitions in TOPICS.items():
        if f'"{topic}"' in code:
            out[f'"{topic}"'] = f'"{ctx.kafka_topic(partitions=partitions, retention_ms=-1)}"'
    if '"orders"' in code:
        out['"orders"'] = f'"{ctx.rabbit_queue}"'
    return out


def test_examples_name_no_endpoint_of_their_own():
    """Endpoints come from the JETSPARK_* variables, so a page runs on any services; and no
    example logs in to RabbitMQ as guest (docker-compose.yml refuses it)."""
    for example in EXAMPLES:
        assert not _HOST_PORT.findall(example.code), f"{example.page}:{example.name} writes an endpoint"
        assert "guest" not in example.code, f"{example.page}:{example.name} logs in as guest"


def test_every_page_with_examples_is_found():
    pages = {e.page for e in EXAMPLES}
    assert "README.md" in pages and any(p.startswith("docs/tutorials/") for p in pages), pages


def _substituted(code: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        code = code.replace(old, new)
    return code


def prepared_code(example: readme.Example, ctx: Context, pg_dsn: str, pg_schema: str, tmp_path: Path) -> str:
    """The example's code with this session's endpoints and fresh names.

    Shared with tests/integration/test_spark_connect.py, which runs the same code
    over Spark Connect."""
    replacements = {
        **_names(example.code, ctx),
        ENV_KAFKA: repr(ctx.kafka_bootstrap),
        ENV_PG: repr(pg_dsn),
        ENV_AMQP: repr(ctx.amqp_url),
        DOC_CHECKPOINTS: f"{tmp_path}/",
        DOC_HOME: f'("{tmp_path}/home/',
        DOC_SCHEMA: f"{pg_schema}.",
    }
    code = _substituted(example.code, replacements)
    assert "JETSPARK_" not in code, f"{example.page}:{example.name}: a JETSPARK_ variable left over"
    return code


def run_example(example: readme.Example, code: str, spark, prefix: str) -> str:
    """``code`` (the example's, names replaced) run in ``spark``'s session, as a reader runs it;
    what it printed. Queries an example left running (it failed half-way) are stopped."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"{example.page}:{example.line}:{example.name}", "exec"),
                 {"__name__": f"{prefix}_{example.name}", "spark": spark})
    finally:
        for query in spark.streams.active:
            query.stop()
    return out.getvalue()


def check_printed(example: readme.Example, printed: str) -> None:
    """What the example printed equals its ``<!-- expected output -->`` block, if it has one."""
    if example.expected is not None:
        assert printed.strip().splitlines() == example.expected.strip().splitlines(), printed


# In a slice of the soak cases (tests/soak_slices.py), not in every run: every make test runs each
# example already, on the printed names and twice, in tests/integration/test_docs_reading_order.py;
# this isolated run (names of its own) names the broken example alone, over the slices.
@pytest.mark.soak
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.name)
def test_doc_example(example: readme.Example, spark, kafka_bootstrap, kafka_topic, pg_dsn, pg_schema,
                     amqp_url, rabbit_queue, tmp_path: Path):
    ctx = Context(kafka_bootstrap, kafka_topic, amqp_url, rabbit_queue)
    code = prepared_code(example, ctx, pg_dsn, pg_schema, tmp_path)
    check_printed(example, run_example(example, code, spark, "readme"))
