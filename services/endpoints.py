"""Connection settings of the three services, and how they map to environment variables."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

ENV_VARS = {
    "kafka": "JETSPARK_KAFKA_BOOTSTRAP",
    "postgres": "JETSPARK_PG_DSN",
    "rabbitmq": "JETSPARK_AMQP_URL",
}
SERVICES = tuple(ENV_VARS)


@dataclass(frozen=True)
class Endpoints:
    """Where each service answers: Kafka bootstrap servers, a libpq DSN, an AMQP URL."""

    kafka_bootstrap: str | None = None
    pg_dsn: str | None = None
    amqp_url: str | None = None

    def get(self, service: str) -> str | None:
        return {"kafka": self.kafka_bootstrap, "postgres": self.pg_dsn,
                "rabbitmq": self.amqp_url}[service]

    def with_endpoint(self, service: str, value: str) -> Endpoints:
        field = {"kafka": "kafka_bootstrap", "postgres": "pg_dsn", "rabbitmq": "amqp_url"}
        return Endpoints(**{**self.__dict__, field[service]: value})

    def as_env(self) -> dict[str, str]:
        """The ``JETSPARK_*`` variables that point other processes at these services."""
        return {ENV_VARS[s]: v for s in SERVICES if (v := self.get(s)) is not None}

    @classmethod
    def from_env(cls) -> Endpoints:
        return cls(*(os.environ.get(ENV_VARS[s]) or None for s in SERVICES))


_PASSWORD_IN_URL = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@]*):[^@/]*@", re.I)
_PASSWORD_KV = re.compile(r"(password\s*=\s*)('[^']*'|\S+)", re.I)


def redact_dsn(dsn: str) -> str:
    """``dsn`` with any password replaced by ``***`` (URL or key=value form)."""
    dsn = _PASSWORD_IN_URL.sub(lambda m: f"{m['scheme']}{m['user']}:***@", dsn)
    return _PASSWORD_KV.sub(lambda m: f"{m.group(1)}***", dsn)
