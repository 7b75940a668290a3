"""Shared fixtures: real services (started once per test session) and one local Spark.

Services come from ``JETSPARK_*`` variables, testcontainers, or local processes
(docs/design.md, "Local services"). A service that cannot start fails the tests that need it, with the cause;
nothing is skipped.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Callable, Iterator

import pytest
from hypothesis import settings

from jetspark.devtools.services import Endpoints, Services, acquire
from tests.soak_slices import (  # noqa: F401  (pytest's hooks: one slice of the soak cases a run)
    pytest_collection_modifyitems,
    pytest_report_header,
    pytest_terminal_summary,
)

# No per-example deadline: on 2 busy cores one example can wait out a JVM's pause, and a
# deadline would turn that into a failure that says nothing about the code.
settings.register_profile("jetspark", parent=settings(), deadline=None)  # on Hypothesis' own CI profile
settings.load_profile("jetspark")

# The tests' X.file credentials live in temporary folders (jetspark/secret_references.py); the
# Spark processes and driver scripts started from here inherit the setting.
os.environ.setdefault("JETSPARK_SECRET_DIRS", tempfile.gettempdir())


@pytest.fixture(scope="session")
def services() -> Iterator[Services]:
    """Kafka, PostgreSQL and RabbitMQ for this test session; stops only what it started.

    jetkafka's pooled consumers are closed first, while their broker is still up.
    """
    handle = acquire()
    yield handle
    from jetspark.datasources.kafka.consumers import close_pooled_consumers

    close_pooled_consumers()
    handle.release()


@pytest.fixture(scope="session")
def endpoints(services: Services) -> Endpoints:
    return services.endpoints


@pytest.fixture(scope="session")
def kafka_bootstrap(endpoints: Endpoints) -> str:
    return endpoints.kafka_bootstrap


@pytest.fixture(scope="session")
def pg_dsn(endpoints: Endpoints) -> str:
    return endpoints.pg_dsn


@pytest.fixture(scope="session")
def amqp_url(endpoints: Endpoints) -> str:
    return endpoints.amqp_url


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "spark_kafka: needs Spark's own Kafka connector (spark-sql-kafka) in the shared session")
    config.addinivalue_line(
        "markers", "spark_avro: needs Spark's own from_avro (spark-avro) in the shared session")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Runs that start Spark map a class-data archive into their driver JVMs (tests/jvm_startup.py).

    Only a run that executes integration tests writes it: ``--collect-only`` starts no JVM.
    """
    if session.config.option.collectonly:
        return
    if any(item.get_closest_marker("integration") for item in session.items):
        from tests import jvm_startup

        path = jvm_startup.archive()
        if path is not None:
            jvm_startup.use(path)


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest):
    """One local Spark session for the whole run (local[2], UI off, RocksDB state).

    When a collected test is marked ``spark_kafka``, the session also loads Spark's own Kafka
    connector (``format("kafka")``, from Maven Central, cached), and ``spark_avro`` Spark's Avro
    functions (``from_avro``): a few jars on the classpath of the one JVM, where a second JVM for
    Spark's side would cost its start-up on every run.
    Streaming reads and windows do not warm Python workers beside their build here (a
    background job beside every test's own); ``tests/integration/test_warm_workers.py`` turns
    it on.
    """
    from jetspark.devtools.spark import local_session
    from jetspark.warm_workers import CONF as WARM_WORKERS

    conf: dict[str, str] = {WARM_WORKERS: "false"}
    from jetspark.devtools.maven import SPARK_AVRO, SPARK_KAFKA, spark_jars_conf

    wanted = {"spark_kafka": SPARK_KAFKA, "spark_avro": SPARK_AVRO}
    packages = [coordinate for marker, coordinates in wanted.items()
                if any(item.get_closest_marker(marker) for item in request.session.items)
                for coordinate in coordinates]
    if packages:
        conf |= spark_jars_conf(packages)
    session = local_session("jetspark-tests", conf=conf)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def schema_registry_url() -> Iterator[str]:
    """A Confluent-compatible Schema Registry (Apicurio Registry, in memory): its base URL, what
    confluent-kafka's ``SchemaRegistryClient`` takes. ``JETSPARK_SCHEMA_REGISTRY_URL`` when set,
    else started once per run, only when a test asks for it; stops only what it started."""
    handle = acquire(["registry"])
    yield handle.endpoints.schema_registry_url
    handle.release()


@pytest.fixture(scope="session")
def spark_master() -> Iterator[str]:
    """A local standalone Spark cluster (master + 2 workers): its ``spark://`` URL."""
    from jetspark.devtools.services import local

    endpoints, started = local.up(["spark"])
    yield endpoints.spark_master
    if started:
        local.down(started)


@pytest.fixture(scope="module")
def spark_connect(tmp_path_factory) -> Iterator[str]:
    """A local Spark Connect server (PySpark's own, in a JVM of its own, local[2]): its
    ``sc://`` URL. Its Python workers run this interpreter, so jetspark is installed on it.
    One per module that asks for it, stopped after that module: its JVM does not stay for the
    rest of the run."""
    from jetspark.devtools.services import spark_connect as server
    from jetspark.devtools.services.process import stop

    record = server.start(tmp_path_factory.mktemp("spark-connect"))
    yield record.endpoint
    for process in record.processes:
        stop(process)


def _unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def kafka_topic(kafka_bootstrap: str) -> Iterator[Callable[..., str]]:
    """Factory: ``kafka_topic(partitions=1, **topic_config)`` creates a fresh topic."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    created: list[str] = []

    def make(partitions: int = 1, **config: str) -> str:
        name = _unique("jet")
        topic = NewTopic(name, partitions, 1, config={k.replace("_", "."): str(v)
                                                       for k, v in config.items()})
        admin.create_topics([topic], operation_timeout=30)[name].result(timeout=30)
        created.append(name)
        return name

    yield make
    if created:
        for fut in admin.delete_topics(created, operation_timeout=30).values():
            fut.result(timeout=30)


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A fresh PostgreSQL schema, dropped with everything in it afterwards."""
    import psycopg
    from psycopg import sql

    name = _unique("jet")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def rabbit_queue(amqp_url: str) -> Iterator[str]:
    """A fresh durable RabbitMQ queue, deleted afterwards."""
    import pika

    name = _unique("jet")
    conn = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        conn.channel().queue_declare(name, durable=True)
    finally:
        conn.close()
    yield name
    conn = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        conn.channel().queue_delete(name)
    finally:
        conn.close()
