"""The pages' examples as a reader runs them: every page in the order of the site's navigation
(mkdocs.yml), in one Spark session, on the topic, queue and table names as printed, twice.

tests/integration/test_readme_examples.py gives each example topics of its own, so it cannot
see pages that write into each other's topics; here they share the services as a reader's
would. The names the pages print are cleared first (a reader starts on empty services);
only the endpoints (``JETSPARK_*``), the checkpoint folder ``/tmp/checkpoints/`` and the home
folder become this test's, the same for both passes. The second pass is a re-run: what each
example prints then is its ``<!-- expected output on a re-run -->`` block when the page has
one (the page says why), else its expected output again.
"""

from __future__ import annotations

import time
from pathlib import Path

import pika
import psycopg
import pytest
from confluent_kafka.admin import AdminClient

from tests import readme
from tests.integration.test_readme_examples import (
    DOC_CHECKPOINTS,
    DOC_HOME,
    ENV_AMQP,
    ENV_KAFKA,
    ENV_PG,
    TOPICS,
    run_example,
)

pytestmark = pytest.mark.integration

QUEUES = ("orders",)
TABLES = ("public.live_windows", "public.vehicle_windows", "public.prices", "public.migrated_windows")
DEAD_LETTERS = ("avro-sink-positions.rejected",)


def _in_reading_order() -> list[readme.Example]:
    return [e for page in readme.nav_pages() for e in readme.page_examples(page)]


def _clear(kafka: str, pg_dsn: str, amqp_url: str) -> None:
    """Delete the printed topics, queue and tables, as on services a reader starts with."""
    admin = AdminClient({"bootstrap.servers": kafka})
    names = {*TOPICS, *DEAD_LETTERS}
    present = [t for t in admin.list_topics(timeout=30).topics if t in names]
    if present:
        for future in admin.delete_topics(present, operation_timeout=30).values():
            future.result(timeout=30)
    deadline = time.monotonic() + 60  # deletion is asynchronous: until the metadata shows it
    while names & set(admin.list_topics(timeout=30).topics):
        assert time.monotonic() < deadline, "the pages' topics were not deleted within 60 s"
        time.sleep(0.2)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for table in TABLES:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        channel = conn.channel()
        for queue in QUEUES:
            channel.queue_delete(queue)
    finally:
        conn.close()


def test_reading_order_examples_on_printed_names_twice(spark, kafka_bootstrap, pg_dsn, amqp_url,
                                                       tmp_path: Path):
    examples = _in_reading_order()
    assert {e.name for e in examples} == {e.name for e in readme.examples()}  # every example, once
    _clear(kafka_bootstrap, pg_dsn, amqp_url)
    replacements = {ENV_KAFKA: repr(kafka_bootstrap), ENV_PG: repr(pg_dsn), ENV_AMQP: repr(amqp_url),
                    DOC_CHECKPOINTS: f"{tmp_path}/checkpoints/", DOC_HOME: f'("{tmp_path}/home/'}
    for run in ("first run", "re-run"):
        for example in examples:
            code = example.code
            for old, new in replacements.items():
                code = code.replace(old, new)
            printed = run_example(example, code, spark, "reading")
            expected = example.expected if run == "first run" else example.rerun_expected
            if expected is not None:
                assert printed.strip().splitlines() == expected.strip().splitlines(), (
                    f"{example.page}:{example.name} ({run}) printed:\n{printed}")
