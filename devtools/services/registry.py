"""Where local services keep their files, and the record of what runs.

Configuration (paths) is resolved from the environment; runtime state (pids, ports,
endpoints) lives in one JSON file guarded by a file lock, so two processes asking for
the services at once start them once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jetspark.devtools.services.files import open_nofollow, private_dir, write_nofollow
from jetspark.devtools.services.process import ProcessRecord


def run_dir() -> Path:
    """Data, logs and the state file of local services (``JETSPARK_RUN_DIR``).

    Defaults to ``/tmp/jetspark-<uid>``, private: created 0700 and checked on each use
    (:func:`.files.private_dir`). As root it is 0711, so the ``postgres`` user PostgreSQL
    then runs as can reach its own data directory in it (``/root`` would not do).
    """
    path = Path(os.environ.get("JETSPARK_RUN_DIR") or f"/tmp/jetspark-{os.getuid()}")
    return private_dir(path, 0o711 if os.getuid() == 0 else 0o700)


def cache_dir() -> Path:
    """Downloaded artifacts that survive restarts (``JETSPARK_CACHE_DIR``)."""
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jetspark"
    path = Path(os.environ.get("JETSPARK_CACHE_DIR") or default)
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass(frozen=True)
class ServiceRecord:
    """One running local service: its processes, ports, data directory and endpoint."""

    name: str
    endpoint: str
    data_dir: str
    ports: dict[str, int]
    processes: tuple[ProcessRecord, ...] = field(default_factory=tuple)

    def alive(self) -> bool:
        return bool(self.processes) and all(p.alive() for p in self.processes)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> ServiceRecord:
        return cls(
            name=data["name"],
            endpoint=data["endpoint"],
            data_dir=data["data_dir"],
            ports={k: int(v) for k, v in data["ports"].items()},
            processes=tuple(ProcessRecord(**p) for p in data["processes"]),
        )


class Registry:
    """The state file ``services.json`` in :func:`run_dir`; use inside :meth:`locked`."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or run_dir()
        self.path = self.directory / "services.json"

    @contextlib.contextmanager
    def locked(self) -> Iterator[Registry]:
        with open_nofollow(self.directory / "services.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield self
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def load(self) -> dict[str, ServiceRecord]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        return {name: ServiceRecord.from_json(rec) for name, rec in data.items()}

    def save(self, records: dict[str, ServiceRecord]) -> None:
        tmp = self.path.with_suffix(".tmp")
        write_nofollow(tmp, json.dumps({n: r.to_json() for n, r in records.items()}, indent=2))
        tmp.replace(self.path)
