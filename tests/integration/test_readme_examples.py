"""Every ```python block of README.md runs, against the real services, and prints what it says.

Each example is named by ``<!-- example: NAME -->`` (see :mod:`tests.readme`) and runs with
``exec`` in the test session's Spark (``spark`` is predefined, as the README's first example
creates it), so a broken API breaks this test. Before it runs:

- endpoints are replaced: the README writes those of docker-compose.yml
  (``127.0.0.1:9092``, ``postgresql://jetspark@127.0.0.1:5432/jetspark``,
  ``amqp://guest:guest@127.0.0.1:5672/%2F``); the test substitutes the session's services;
- ``/tmp/checkpoints/`` becomes a fresh temporary directory, the ``public.`` schema a fresh
  PostgreSQL schema, and the quoted names of topics and queues (``"positions"``,
  ``"speeding"``, ``"orders"``) unique ones;
- the data an example reads is produced by its set-up in ``SETUPS`` (documented there).

Output: when the README has an ``<!-- expected output -->`` block after the example, what
the example prints must equal it line by line; examples also ``assert`` themselves.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import readme

pytestmark = pytest.mark.integration

README_KAFKA = "127.0.0.1:9092"
README_PG = "postgresql://jetspark@127.0.0.1:5432/jetspark"
README_AMQP = "amqp://guest:guest@127.0.0.1:5672/%2F"
README_CHECKPOINTS = "/tmp/checkpoints/"
README_SCHEMA = "public."
_HOST_PORT = re.compile(r"(?:localhost|\d+\.\d+\.\d+\.\d+):\d+")

EXAMPLES = readme.examples()

# The README's Kafka data: vehicles v1…v4, one position a second for 30 s from T0 (record
# timestamp = event time), vehicle k on partition k % 2 of a 2-partition topic.
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
VEHICLES = 4
SECONDS = 30


def speed_of(vehicle: int, second: int) -> float:
    return float(60 + (second * 13 + vehicle * 29) % 61)


@dataclass
class Context:
    """What a set-up may use: the session's services and fixtures."""

    kafka_bootstrap: str
    kafka_topic: Callable[..., str]
    amqp_url: str
    rabbit_queue: str


def produce_positions(ctx: Context) -> dict[str, str]:
    """Topic ``positions`` (2 partitions): 120 JSON positions, in event-time order.

    Retention is off: the fixed event times lie in the past, and the broker would delete
    records older than its time-based retention (7 days by default) at once.
    """
    from confluent_kafka import Producer

    topic = ctx.kafka_topic(partitions=2, retention_ms=-1)
    producer = Producer({"bootstrap.servers": ctx.kafka_bootstrap})
    t0_ms = int(T0.timestamp() * 1000)
    for second in range(SECONDS):
        for k in range(1, VEHICLES + 1):
            value = json.dumps({"vehicle": f"v{k}", "speed": speed_of(k, second)})
            producer.produce(topic, value=value.encode(), key=f"v{k}".encode(), partition=k % 2,
                             timestamp=t0_ms + second * 1000)
    assert producer.flush(30) == 0
    return {'"positions"': f'"{topic}"'}


def positions_and_speeding(ctx: Context) -> dict[str, str]:
    """``positions`` as above, and an empty 1-partition topic ``speeding`` for the sink."""
    return {**produce_positions(ctx), '"speeding"': f'"{ctx.kafka_topic(partitions=1, retention_ms=-1)}"'}


def publish_orders(ctx: Context) -> dict[str, str]:
    """Queue ``orders``: orders 0…99 (message_id ``order-<n>``, AMQP timestamp T0 + n s),
    then orders 0…9 once more (the same IDs: a publisher's retry)."""
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(ctx.amqp_url))
    try:
        channel = conn.channel()
        channel.confirm_delivery()
        for n in [*range(100), *range(10)]:
            props = pika.BasicProperties(message_id=f"order-{n}", delivery_mode=2,
                                         timestamp=int(T0.timestamp()) + n)
            channel.basic_publish("", ctx.rabbit_queue, json.dumps({"order": n}).encode(), props)
    finally:
        conn.close()
    return {'"orders"': f'"{ctx.rabbit_queue}"'}


def nothing(ctx: Context) -> dict[str, str]:
    """Needs no data (a static DataFrame, a batch write into a fresh schema)."""
    return {}


SETUPS: dict[str, Callable[[Context], dict[str, str]]] = {
    "session": nothing,
    "pipeline": produce_positions,
    "kafka-source": produce_positions,
    "kafka-batch": produce_positions,
    "kafka-sink": positions_and_speeding,
    "rabbitmq-source": publish_orders,
    "jdbc-upsert": nothing,
    "windowing": nothing,
    "windowing-custom": nothing,
    "listener-inspect": produce_positions,
    "early-results": produce_positions,
}


def test_every_example_has_a_setup():
    assert {e.name for e in EXAMPLES} == set(SETUPS), "README examples and SETUPS differ"


def _substituted(code: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        code = code.replace(old, new)
    return code


def prepared_code(example: readme.Example, ctx: Context, pg_dsn: str, pg_schema: str, tmp_path: Path) -> str:
    """The example's code after its set-up ran, with this session's endpoints and names.

    Shared with tests/integration/test_spark_connect.py, which runs the same code
    over Spark Connect."""
    replacements = {
        **SETUPS[example.name](ctx),
        README_KAFKA: ctx.kafka_bootstrap,
        README_PG: pg_dsn,
        README_AMQP: ctx.amqp_url,
        README_CHECKPOINTS: f"{tmp_path}/",
        README_SCHEMA: f"{pg_schema}.",
    }
    code = _substituted(example.code, replacements)
    endpoints = (ctx.kafka_bootstrap, pg_dsn, ctx.amqp_url)
    ours = {m for endpoint in endpoints for m in _HOST_PORT.findall(endpoint)}
    stray = set(_HOST_PORT.findall(code)) - ours
    assert not stray, f"{example.name}: endpoints the test does not replace: {stray}"
    return code


def check_printed(example: readme.Example, printed: str) -> None:
    """What the example printed equals its ``<!-- expected output -->`` block, if it has one."""
    if example.expected is not None:
        assert printed.strip().splitlines() == example.expected.strip().splitlines(), printed


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.name)
def test_readme_example(example: readme.Example, spark, kafka_bootstrap, kafka_topic, pg_dsn, pg_schema,
                        amqp_url, rabbit_queue, tmp_path: Path):
    ctx = Context(kafka_bootstrap, kafka_topic, amqp_url, rabbit_queue)
    code = prepared_code(example, ctx, pg_dsn, pg_schema, tmp_path)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"README.md:{example.line}:{example.name}", "exec"),
                 {"__name__": f"readme_{example.name}", "spark": spark})
    finally:
        for query in spark.streams.active:  # an example that failed half-way
            query.stop()
    check_printed(example, out.getvalue())
