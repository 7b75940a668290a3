"""A Confluent-compatible Schema Registry: Apicurio Registry from Maven Central, in memory.

Apicurio publishes its packaged Quarkus server on Maven Central as the ``all`` tar.gz of
``io.apicurio:apicurio-registry-app`` (a ``-runner.jar`` and its ``lib/`` folder; the plain jar
is only the application's classes, which Quarkus must first build). That one file is fetched
with Maven's ``dependency:copy`` (its POM's parent, ``io.apicurio:apicurio-registry``, is not
served for 3.0.9, so the artifact cannot be resolved as a dependency) and unpacked into the cache.
It runs on the ``java`` on PATH (3.0.x is built for Java 11 on Quarkus 3.15, so Java 17
does), bound to 127.0.0.1 on a free port, storing in an in-memory H2 database: a restart
forgets every schema. Clients (confluent-kafka's ``SchemaRegistryClient``) take the
Confluent-compatible API's base URL, ``http://127.0.0.1:<port>/apis/ccompat/v7``.
Not started by default: ``jetspark services up registry``.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import urllib.request
from pathlib import Path

from jetspark.devtools.maven import copy_artifact
from jetspark.devtools.services.process import ensure_port_free, free_port, spawn, wait_ready
from jetspark.devtools.services.registry import ServiceRecord, cache_dir
from jetspark.errors import JetsparkError, ServiceError

NAME = "registry"
APICURIO_VERSION = "3.0.9"
"""The newest Apicurio Registry on Maven Central whose server runs on Java 17 (3.3.x is built
for Java 21); keep ``docker-compose.yml``'s image the same."""
ARTIFACT = f"io.apicurio:apicurio-registry-app:{APICURIO_VERSION}:tar.gz:all"
IMAGE = f"apicurio/apicurio-registry:{APICURIO_VERSION}"
CCOMPAT_PATH = "/apis/ccompat/v7"
"""Apicurio 3.x's Confluent Schema Registry API (2.x had ``/apis/ccompat/v6``)."""
JVM_HEAP = os.environ.get("JETSPARK_SCHEMA_REGISTRY_HEAP", "512m")
_RUNNER = f"apicurio-registry-app-{APICURIO_VERSION}-runner.jar"

# Quarkus and Apicurio settings, as system properties. In-memory H2 is Apicurio's default
# storage; it is named here so that a change of default cannot make the service persistent.
# Deleting subjects and versions is on, as a Confluent registry allows it. A small connection
# pool: the default (20 connections opened at start) only slows the start.
_SETTINGS = {
    "quarkus.http.host": "127.0.0.1",
    "apicurio.storage.kind": "sql",
    "apicurio.storage.sql.kind": "h2",
    "apicurio.rest.deletion.group.enabled": "true",
    "apicurio.rest.deletion.artifact.enabled": "true",
    "apicurio.rest.deletion.artifact-version.enabled": "true",
    "apicurio.datasource.jdbc.initial-size": "2",
    "apicurio.datasource.jdbc.min-size": "2",
    "apicurio.datasource.jdbc.max-size": "20",
    "quarkus.http.access-log.enabled": "false",
}


def app_dir() -> Path:
    """The unpacked server (its runner jar and ``lib/``), fetched and unpacked once into the
    cache (``JETSPARK_SCHEMA_REGISTRY_HOME``: a folder holding the runner jar instead)."""
    explicit = os.environ.get("JETSPARK_SCHEMA_REGISTRY_HOME")
    if explicit:
        return Path(explicit)
    target = cache_dir() / f"apicurio-registry-{APICURIO_VERSION}"
    if (target / _RUNNER).exists():
        return target
    if shutil.which("mvn") is None:
        raise ServiceError(
            f"{NAME}: Apicurio Registry {APICURIO_VERSION} is not cached and Maven ('mvn') is not "
            "installed to fetch it; install Maven or set JETSPARK_SCHEMA_REGISTRY_HOME to an "
            f"unpacked apicurio-registry-app-{APICURIO_VERSION}-all.tar.gz"
        )
    download = cache_dir() / f"apicurio-registry-{APICURIO_VERSION}.download"
    try:
        copy_artifact(ARTIFACT, download, f"Apicurio Registry {APICURIO_VERSION}")
    except JetsparkError as e:
        raise ServiceError(f"{NAME}: {e}") from None
    archives = list(download.glob("*.tar.gz"))
    if len(archives) != 1:
        raise ServiceError(f"{NAME}: expected one Apicurio Registry archive in {download}, "
                           f"found {[p.name for p in archives]}")
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    with tarfile.open(archives[0]) as archive:
        _extract(archive, partial)
    if not (partial / _RUNNER).exists():
        raise ServiceError(f"{NAME}: {archives[0].name} holds no {_RUNNER}")
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    shutil.rmtree(download, ignore_errors=True)  # Maven's local repository keeps a copy
    return target


def _extract(archive: tarfile.TarFile, folder: Path) -> None:
    """Unpack with no absolute path, link or ``../`` out of ``folder`` (tarfile's ``data``
    filter, from Python 3.11.4; before it, the same refusals checked here)."""
    if hasattr(tarfile, "data_filter"):
        archive.extractall(folder, filter="data")
        return
    for member in archive.getmembers():
        target = (folder / member.name).resolve()
        if member.issym() or member.islnk() or not target.is_relative_to(folder.resolve()):
            raise ServiceError(f"{NAME}: the archive holds {member.name!r}, which would land outside "
                               f"{folder} or is a link")
    archive.extractall(folder)


def command(port: int, *, heap: str = JVM_HEAP) -> list[str]:
    """The server's command line: in memory, on 127.0.0.1:``port``."""
    java = shutil.which("java")
    if java is None:
        raise ServiceError(f"{NAME}: no 'java' on PATH; Apicurio Registry needs a Java 17+ runtime")
    settings = {**_SETTINGS, "quarkus.http.port": str(port)}
    # Only the C1 compiler and the serial collector: a test registry serves a few requests, and
    # on 2 busy cores this halves its start (about 10 s instead of 25).
    return [
        java, f"-Xmx{heap}", "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
        "-Djava.awt.headless=true",
        *(f"-D{key}={value}" for key, value in settings.items()),
        "-jar", str(app_dir() / _RUNNER),
    ]


def url_of(port: int, host: str = "127.0.0.1") -> str:
    """The Confluent-compatible base URL, as ``SchemaRegistryClient({"url": ...})`` takes it."""
    return f"http://{host}:{port}{CCOMPAT_PATH}"


def start(data_dir: Path, ports: dict[str, int] | None = None) -> ServiceRecord:
    """Start the registry (nothing is kept in ``data_dir`` but its log: storage is in memory,
    so a restart starts empty); ready when its Confluent API lists the subjects."""
    ports = ports or {"http": free_port()}
    ensure_port_free(ports["http"], NAME)
    argv = command(ports["http"])
    data_dir.mkdir(parents=True, exist_ok=True)
    # The working directory is the data folder: whatever the server writes there stays in it.
    proc = spawn(argv, log=data_dir / "registry.log", cwd=data_dir)
    url = url_of(ports["http"])
    wait_ready(NAME, proc, lambda: probe(url), timeout_s=180)
    return ServiceRecord(NAME, url, str(data_dir), dict(ports), (proc,))


def probe(url: str, timeout_s: float = 5.0) -> None:
    """Raises unless ``url`` (a Confluent-compatible base URL) answers ``GET /subjects`` with a
    JSON list: the API is up and its storage answers."""
    with urllib.request.urlopen(f"{url.rstrip('/')}/subjects", timeout=timeout_s) as resp:
        subjects = json.load(resp)
    if not isinstance(subjects, list):
        raise ServiceError(f"{NAME}: GET {url}/subjects answered {subjects!r}, not a list of subjects")
