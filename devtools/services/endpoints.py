"""Connection settings of the services, and how they map to environment variables."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from jetspark.redaction import redact_dsn

__all__ = ["ENV_VARS", "SERVICES", "Endpoints", "redact_dsn"]

ENV_VARS = {
    "kafka": "JETSPARK_KAFKA_BOOTSTRAP",
    "postgres": "JETSPARK_PG_DSN",
    "rabbitmq": "JETSPARK_AMQP_URL",
    "spark": "JETSPARK_SPARK_MASTER",
    "registry": "JETSPARK_SCHEMA_REGISTRY_URL",
}
# What tests and the demo start by default; a Spark standalone cluster and a Schema Registry
# only on request.
SERVICES = ("kafka", "postgres", "rabbitmq")
_FIELDS = {"kafka": "kafka_bootstrap", "postgres": "pg_dsn", "rabbitmq": "amqp_url",
           "spark": "spark_master", "registry": "schema_registry_url"}


@dataclass(frozen=True)
class Endpoints:
    """Where each service answers: Kafka bootstrap servers, a libpq DSN, an AMQP URL, the
    master URL of a Spark standalone cluster, and a Schema Registry's Confluent-compatible
    base URL (what confluent-kafka's ``SchemaRegistryClient`` takes as ``url``)."""

    kafka_bootstrap: str | None = None
    pg_dsn: str | None = None
    amqp_url: str | None = None
    spark_master: str | None = None
    schema_registry_url: str | None = None

    def get(self, service: str) -> str | None:
        return getattr(self, _FIELDS[service])

    def with_endpoint(self, service: str, value: str) -> Endpoints:
        return replace(self, **{_FIELDS[service]: value})

    def as_env(self) -> dict[str, str]:
        """The ``JETSPARK_*`` variables that point other processes at these services."""
        return {ENV_VARS[s]: v for s in ENV_VARS if (v := self.get(s)) is not None}

    @classmethod
    def from_env(cls) -> Endpoints:
        return cls(**{_FIELDS[s]: os.environ.get(v) or None for s, v in ENV_VARS.items()})


def addresses(service: str, value: str) -> list[tuple[str, int]]:
    """The (host, port) pairs a service's endpoint names (Kafka: every bootstrap server)."""
    if service == "kafka":
        pairs = []
        for server in value.split(","):
            host, _, port = server.strip().rpartition("://")[2].rpartition(":")
            pairs.append((host.strip("[]") or "127.0.0.1", int(port or 9092)))
        return pairs
    if service == "postgres":
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(value)
        return [(str(params.get("host") or "127.0.0.1").split(",")[0],
                 int(str(params.get("port") or 5432).split(",")[0]))]
    url = urlsplit(value)
    default = {"rabbitmq": 5671 if url.scheme == "amqps" else 5672, "spark": 7077,
               "registry": 443 if url.scheme == "https" else 80}[service]
    return [(url.hostname or "127.0.0.1", url.port or default)]


def answers(service: str, value: str, *, timeout_s: float = 3.0) -> bool:
    """Whether anything accepts a TCP connection at one of the endpoint's addresses (a host
    path such as PostgreSQL's Unix socket folder counts as answering: it is not checked)."""
    from jetspark.devtools.services.process import port_open

    return any(host.startswith("/") or port_open(port, host, timeout_s)
               for host, port in addresses(service, value))
