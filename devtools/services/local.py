"""Local services on 127.0.0.1 without Docker: start (idempotent), restart, stop by pid."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

from jetspark.devtools.services import kafka, postgres, rabbitmq, schema_registry, spark_cluster
from jetspark.devtools.services.endpoints import SERVICES, Endpoints
from jetspark.devtools.services.process import stop
from jetspark.devtools.services.registry import Registry, ServiceRecord
from jetspark.errors import ServiceError

# The three brokers start by default; the Spark standalone cluster and the Schema Registry
# only when named.
_MODULES: dict[str, ModuleType] = {
    "kafka": kafka, "postgres": postgres, "rabbitmq": rabbitmq, "spark": spark_cluster,
    "registry": schema_registry,
}


def _names(names: Iterable[str] | None) -> list[str]:
    chosen = list(names) if names is not None else list(SERVICES)
    for name in chosen:
        if name not in _MODULES:
            raise ServiceError(f"unknown service {name!r}; known: {', '.join(_MODULES)}")
    return chosen


def up(names: Iterable[str] | None = None) -> tuple[Endpoints, list[str]]:
    """Start the named services unless they already run; return endpoints and what started.

    Services start in parallel; each waits for real readiness (a round trip). When one
    fails, those started by this call are stopped again and the error names the cause.
    """
    chosen = _names(names)
    registry = Registry()
    with registry.locked():
        records = registry.load()
        missing = [n for n in chosen if not (n in records and records[n].alive())]
        for name in missing:  # a dead leftover: clear its processes, start afresh
            if name in records:
                _stop_record(records.pop(name))
            shutil.rmtree(registry.directory / name, ignore_errors=True)
        started: dict[str, ServiceRecord] = {}
        errors: list[str] = []
        with ThreadPoolExecutor(max_workers=max(1, len(missing))) as pool:
            futures = {
                n: pool.submit(_MODULES[n].start, registry.directory / n) for n in missing
            }
            for name, fut in futures.items():
                try:
                    started[name] = fut.result()
                except Exception as e:
                    errors.append(str(e) if str(e).startswith(name) else f"{name}: {e}")
        if errors:
            for rec in started.values():
                _stop_record(rec)
            raise ServiceError("local services failed to start:\n" + "\n".join(errors))
        records.update(started)
        registry.save(records)
        endpoints = Endpoints()
        for name in chosen:
            endpoints = endpoints.with_endpoint(name, records[name].endpoint)
        return endpoints, list(started)


def down(names: Iterable[str] | None = None) -> list[str]:
    """Stop the named services started by jetspark (by recorded pid) and drop their data."""
    chosen = _names(names)
    registry = Registry()
    with registry.locked():
        records = registry.load()
        stopped = []
        for name in chosen:
            rec = records.pop(name, None)
            if rec is not None:
                _stop_record(rec)
                stopped.append(name)
            shutil.rmtree(registry.directory / name, ignore_errors=True)
        registry.save(records)
        return stopped


def restart(name: str) -> ServiceRecord:
    """Stop a running service and start it again on the same ports, keeping its data.

    For fault-injection tests: a broker restart mid-stream, PostgreSQL restarted while
    prepared transactions are pending.
    """
    _names([name])
    registry = Registry()
    with registry.locked():
        records = registry.load()
        if name not in records:
            raise ServiceError(f"{name} was not started by jetspark; nothing to restart")
        old = records[name]
        _stop_record(old)
        new = _MODULES[name].start(Path(old.data_dir), old.ports)
        records[name] = new
        registry.save(records)
        return new


def status() -> dict[str, ServiceRecord]:
    """The recorded services, alive or not."""
    registry = Registry()
    with registry.locked():
        return registry.load()


def _stop_record(record: ServiceRecord) -> None:
    for proc in record.processes:
        stop(proc)
