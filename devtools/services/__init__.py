"""Real Kafka, PostgreSQL and RabbitMQ for tests and the demo (docs/design.md, "Local services").

:func:`acquire` picks, per service and in this order: an existing service named by the
``JETSPARK_*`` environment variable; a testcontainers container when a Docker engine
answers; a local process on 127.0.0.1 started from the installed packages. It returns a
:class:`Services` handle whose ``release()`` stops only what this call started.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from jetspark.devtools.services.endpoints import ENV_VARS, SERVICES, Endpoints, answers, redact_dsn
from jetspark.errors import ServiceError

__all__ = ["ENV_VARS", "SERVICES", "Endpoints", "Services", "acquire", "redact_dsn"]


@dataclass
class Services:
    """Endpoints of the acquired services and what must be stopped on release."""

    endpoints: Endpoints
    origin: dict[str, str]  # service -> "env" | "docker" | "local" | "local (reused)"
    _started_local: list[str] = field(default_factory=list)
    _containers: list = field(default_factory=list)

    def release(self) -> None:
        """Stop what :func:`acquire` started; leave reused and external services alone."""
        from jetspark.devtools.services import local

        for c in self._containers:
            c.stop()
        self._containers.clear()
        if self._started_local:
            local.down(self._started_local)
            self._started_local.clear()


def acquire(names: Iterable[str] = SERVICES, *, docker: bool | None = None) -> Services:
    """Make the named services available (env var, then Docker, then local processes).

    ``docker`` forces (True) or forbids (False) testcontainers; by default it is used
    when an engine answers, unless ``JETSPARK_NO_DOCKER=1``.
    """
    wanted = list(names)
    from_env = Endpoints.from_env()
    endpoints, origin = Endpoints(), {}
    for name in wanted:
        value = from_env.get(name)
        if value:
            _require_answering(name, value)
            endpoints, origin[name] = endpoints.with_endpoint(name, value), "env"
    rest = [n for n in wanted if n not in origin]
    handle = Services(endpoints, origin)
    if not rest:
        return handle
    if docker is None:
        from jetspark.devtools.services.containers import docker_available

        docker = os.environ.get("JETSPARK_NO_DOCKER") != "1" and docker_available()
    if docker:
        from jetspark.devtools.services import containers

        got, handle._containers = containers.start(rest)
        for name in rest:
            handle.endpoints = handle.endpoints.with_endpoint(name, got.get(name))
            origin[name] = "docker"
        return handle
    from jetspark.devtools.services import local

    got, started = local.up(rest)
    handle._started_local = started
    for name in rest:
        handle.endpoints = handle.endpoints.with_endpoint(name, got.get(name))
        origin[name] = "local" if name in started else "local (reused)"
    return handle


def _require_answering(name: str, value: str) -> None:
    """A service named by its ``JETSPARK_*`` variable must answer now: a stopped one would
    otherwise cost every test that uses it its client's whole timeout."""
    if not answers(name, value):
        shown = redact_dsn(value) if name == "postgres" else value.split("@")[-1]
        raise ServiceError(
            f"{name}: {ENV_VARS[name]} names {shown}, where nothing accepts a connection; "
            f"start the service there, or unset {ENV_VARS[name]} to let jetspark start one")
