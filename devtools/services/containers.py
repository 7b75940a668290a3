"""The services as Docker containers via testcontainers (when a Docker engine answers).

Same images and settings as ``docker-compose.yml``. Containers live as long as the
Python process that started them (testcontainers' reaper removes them after).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable

from jetspark.devtools.services import kafka, postgres, rabbitmq, schema_registry
from jetspark.devtools.services.endpoints import Endpoints
from jetspark.devtools.services.process import free_port
from jetspark.errors import ServiceError

KAFKA_IMAGE = f"apache/kafka:{kafka.KAFKA_VERSION}"
POSTGRES_IMAGE = "postgres:16"
LOOPBACK = "127.0.0.1"
"""Where containers' ports are published (Docker's ``(host ip,)`` binding: a free port there)."""
RABBITMQ_IMAGE = "rabbitmq:3.13"


def docker_available() -> bool:
    """True when a Docker engine answers a ping within two seconds."""
    try:
        import docker

        client = docker.from_env(timeout=2)
        return bool(client.ping())
    except Exception:
        return False


def _wait(name: str, probe: Callable[[], object], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            probe()
            return
        except Exception as e:
            if time.monotonic() > deadline:
                raise ServiceError(f"{name} container not ready after {timeout_s:.0f} s: {e!r}") from e
        time.sleep(0.5)


def start(names: Iterable[str]) -> tuple[Endpoints, list]:
    """Start containers for ``names``; return endpoints and the containers to stop later."""
    from testcontainers.core.container import DockerContainer

    endpoints, containers = Endpoints(), []
    password = secrets.token_hex(12)  # PostgreSQL's and RabbitMQ's, instead of trust and guest
    for name in names:
        if name == "kafka":
            port = free_port()
            c = (
                DockerContainer(KAFKA_IMAGE)
                .with_bind_ports(port, (LOOPBACK, port))
                .with_env("KAFKA_NODE_ID", "1")
                .with_env("KAFKA_PROCESS_ROLES", "broker,controller")
                .with_env("KAFKA_CONTROLLER_QUORUM_VOTERS", "1@localhost:9093")
                .with_env("KAFKA_LISTENERS", f"PLAINTEXT://0.0.0.0:{port},CONTROLLER://0.0.0.0:9093")
                .with_env("KAFKA_ADVERTISED_LISTENERS", f"PLAINTEXT://127.0.0.1:{port}")
                .with_env("KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER")
                .with_env("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "1")
                .with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
                .with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1")
                .with_env("KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR", "1")
                .with_env("KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR", "1")
                .with_env("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0")
            )
            c.start()
            url = f"127.0.0.1:{port}"
            probe: Callable[[], object] = lambda url=url: kafka.probe(url)  # noqa: E731
        elif name == "postgres":
            c = (
                DockerContainer(POSTGRES_IMAGE)
                .with_bind_ports(5432, (LOOPBACK,))
                .with_env("POSTGRES_USER", postgres.USER)
                .with_env("POSTGRES_DB", postgres.DATABASE)
                .with_env("POSTGRES_PASSWORD", password)
                .with_command(
                    f"postgres -c max_prepared_transactions={postgres.MAX_PREPARED_TRANSACTIONS}"
                    " -c max_connections=200"
                )
            )
            c.start()
            url = (f"postgresql://{postgres.USER}:{password}@127.0.0.1:"
                   f"{c.get_exposed_port(5432)}/{postgres.DATABASE}")
            probe = lambda url=url: postgres.probe(url)  # noqa: E731
        elif name == "rabbitmq":
            c = (DockerContainer(RABBITMQ_IMAGE).with_bind_ports(5672, (LOOPBACK,))
                 .with_env("RABBITMQ_DEFAULT_USER", "jetspark").with_env("RABBITMQ_DEFAULT_PASS", password))
            c.start()
            url = f"amqp://jetspark:{password}@127.0.0.1:{c.get_exposed_port(5672)}/%2F"
            probe = lambda url=url: rabbitmq.probe(url)  # noqa: E731
        elif name == "registry":  # Apicurio Registry, in memory (its image's default storage)
            c = DockerContainer(schema_registry.IMAGE).with_bind_ports(8080, (LOOPBACK,))
            c.start()
            url = schema_registry.url_of(int(c.get_exposed_port(8080)))
            probe = lambda url=url: schema_registry.probe(url)  # noqa: E731
        else:
            raise ServiceError(f"unknown service {name!r}")
        containers.append(c)
        try:
            _wait(name, probe)
        except ServiceError:
            for started in containers:
                started.stop()
            raise
        endpoints = endpoints.with_endpoint(name, url)
    return endpoints, containers
