"""A Confluent-compatible Schema Registry: Apicurio Registry from Maven Central, in memory.

Apicurio publishes its packaged Quarkus server on Maven Central as the ``all`` tar.gz of
``io.apicurio:apicurio-registry-app`` (a ``-runner.jar`` and its ``lib/`` folder; the plain jar
is only the application's classes, which Quarkus must first build). That one file is fetched
with Maven's ``dependency:copy`` (its POM's parent, ``io.apicurio:apicurio-registry``, is not
served for 3.0.9, so the artifact cannot be resolved as a dependency) and unpacked into the cache.
It runs on the ``java`` on PATH (3.0.x is built for Java 11 on Quarkus 3.15, so Java 17
does), bound to 127.0.0.1 on a free port, storing in an in-memory H2 database: a restart
forgets every schema. Clients (confluent-kafka's ``SchemaRegistryClient``) take the
Confluent-compatible API's base URL, ``http://jetspark:<password>@127.0.0.1:<port>/apis/ccompat/v7``.
Not started by default: ``jetspark services up registry``.

It has a user and a password, as the local PostgreSQL and RabbitMQ do: Apicurio 3.0.x
authenticates only through an OpenID Connect server, so the server listens on a Unix domain
socket in a 0700 folder of its data (Quarkus's ``quarkus.http.domain-socket``, on Netty's native
epoll transport, whose two jars are fetched beside it; no TCP port), and a gate
(:mod:`.registry_gate`) on the registry's port of 127.0.0.1 takes HTTP basic authentication,
user ``jetspark`` and a random password kept in ``registry-password`` (0600) beside the data,
and forwards to the socket. No other local user reaches the registry without that password.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import sys
import tarfile
import urllib.parse
import urllib.request
from pathlib import Path

from jetspark.devtools.maven import copy_artifact
from jetspark.devtools.services.files import private_dir, write_nofollow
from jetspark.devtools.services.process import ensure_port_free, free_port, spawn, stop, wait_ready
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
_MAIN = "io.quarkus.runner.GeneratedMain"
NETTY_VERSION = "4.1.118.Final"
"""The Netty of Apicurio 3.0.9's ``lib/``: its native epoll transport must be the same version."""
_EPOLL = (f"io.netty:netty-transport-classes-epoll:{NETTY_VERSION}",
          f"io.netty:netty-transport-native-epoll:{NETTY_VERSION}:jar:linux-x86_64")
USER = "jetspark"
PASSWORD_FILE = "registry-password"
SOCKET = "api/registry.sock"
"""The server's socket, under ``data_dir``; its folder is 0700."""

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
    # Only the Unix domain socket (native transport), no TCP listener; the client's address,
    # which Apicurio's audit log asks for and a socket peer lacks, comes from the gate.
    "quarkus.vertx.prefer-native-transport": "true",
    "quarkus.http.domain-socket-enabled": "true",
    "quarkus.http.host-enabled": "false",
    "quarkus.http.proxy.proxy-address-forwarding": "true",
    "quarkus.http.proxy.allow-x-forwarded": "true",
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


def native_transport() -> list[Path]:
    """Netty's native epoll transport (its classes and its linux-x86_64 library), which a Unix
    domain socket needs and Apicurio's packaged server lacks: fetched once into the cache."""
    target = cache_dir() / f"netty-epoll-{NETTY_VERSION}"
    jars = sorted(target.glob("*.jar")) if target.is_dir() else []
    if len(jars) == len(_EPOLL):
        return jars
    if shutil.which("mvn") is None:
        raise ServiceError(f"{NAME}: Netty's native epoll transport {NETTY_VERSION} is not cached and "
                           "Maven ('mvn') is not installed to fetch it")
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        for coordinate in _EPOLL:
            folder = partial / coordinate.split(":")[1]
            copy_artifact(coordinate, folder, f"Netty's native transport ({coordinate})")
            for jar in folder.glob("*.jar"):
                jar.rename(partial / jar.name)
            shutil.rmtree(folder)
    except JetsparkError as e:
        raise ServiceError(f"{NAME}: {e}") from None
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return sorted(target.glob("*.jar"))


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


def command(socket_path: Path, *, heap: str = JVM_HEAP) -> list[str]:
    """The server's command line: in memory, on the Unix domain socket ``socket_path`` only."""
    java = shutil.which("java")
    if java is None:
        raise ServiceError(f"{NAME}: no 'java' on PATH; Apicurio Registry needs a Java 17+ runtime")
    settings = {**_SETTINGS, "quarkus.http.domain-socket": str(socket_path)}
    classpath = os.pathsep.join(str(p) for p in (app_dir() / _RUNNER, *native_transport()))
    # Only the C1 compiler and the serial collector: a test registry serves a few requests, and
    # on 2 busy cores this halves its start (about 10 s instead of 25).
    return [
        java, f"-Xmx{heap}", "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
        "-Djava.awt.headless=true",
        *(f"-D{key}={value}" for key, value in settings.items()),
        "-cp", classpath, _MAIN,
    ]


def url_of(port: int, host: str = "127.0.0.1", user_info: str | None = None) -> str:
    """The Confluent-compatible base URL, as ``SchemaRegistryClient({"url": ...})`` takes it
    (``user_info``: ``user:password``, percent-encoded, put in it)."""
    return f"http://{user_info + '@' if user_info else ''}{host}:{port}{CCOMPAT_PATH}"


def own_password(data_dir: Path) -> str:
    """The gate's password: made at the first start, kept in ``data_dir`` (0600)."""
    path = data_dir / PASSWORD_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        password = secrets.token_hex(16)
        write_nofollow(path, password)
        return password
    with os.fdopen(fd) as f:
        return f.read().strip()


def start(data_dir: Path, ports: dict[str, int] | None = None) -> ServiceRecord:
    """Start the registry on its socket and the gate on ``ports["http"]`` (nothing is kept in
    ``data_dir`` but the password, the socket and the logs: storage is in memory, so a restart
    starts empty); ready when its Confluent API lists the subjects through the gate."""
    ports = ports or {"http": free_port()}
    ensure_port_free(ports["http"], NAME)
    data_dir.mkdir(parents=True, exist_ok=True)
    socket_path = data_dir / SOCKET
    private_dir(socket_path.parent, 0o700)
    if len(os.fsencode(socket_path)) > 107:
        raise ServiceError(f"{NAME}: the socket path {socket_path} is longer than a Unix socket's 107 "
                           "bytes; use a shorter JETSPARK_RUN_DIR")
    socket_path.unlink(missing_ok=True)  # one left by a server that was killed
    argv = command(socket_path)
    password = own_password(data_dir)
    # The working directory is the data folder: whatever the server writes there stays in it.
    proc = spawn(argv, log=data_dir / "registry.log", cwd=data_dir)
    wait_ready(NAME, proc, lambda: _probe_socket(socket_path), timeout_s=180)
    gate = spawn([sys.executable, "-m", "jetspark.devtools.services.registry_gate", str(ports["http"]),
                  str(socket_path), str(data_dir / PASSWORD_FILE)], log=data_dir / "gate.log", cwd=data_dir)
    url = url_of(ports["http"], user_info=f"{USER}:{urllib.parse.quote(password, safe='')}")
    try:
        wait_ready(NAME, gate, lambda: probe(url), timeout_s=30)
    except ServiceError:
        stop(proc)
        raise
    # The gate first, then the server: stop() goes through processes in this order.
    return ServiceRecord(NAME, url, str(data_dir), dict(ports), (gate, proc))


def _probe_socket(socket_path: Path) -> None:
    """Raises unless the server answers ``GET /subjects`` on its socket."""
    from jetspark.devtools.services.registry_gate import unix_connection

    conn = unix_connection(str(socket_path), timeout_s=5.0)
    try:
        conn.request("GET", f"{CCOMPAT_PATH}/subjects", headers={"X-Forwarded-For": "127.0.0.1:0"})
        answer = conn.getresponse()
        if answer.status != 200:
            raise ServiceError(f"{NAME}: GET {CCOMPAT_PATH}/subjects answered HTTP {answer.status}")
        answer.read()
    finally:
        conn.close()


def probe(url: str, timeout_s: float = 5.0) -> None:
    """Raises unless ``url`` (a Confluent-compatible base URL, with its user info if any)
    answers ``GET /subjects`` with a JSON list: the API is up and its storage answers."""
    parts = urllib.parse.urlsplit(url)
    bare = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    request = urllib.request.Request(f"{bare.rstrip('/')}/subjects")
    if parts.username is not None:
        pair = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        request.add_header("Authorization", "Basic " + base64.b64encode(pair.encode()).decode())
    with urllib.request.urlopen(request, timeout=timeout_s) as resp:
        subjects = json.load(resp)
    if not isinstance(subjects, list):
        raise ServiceError(f"{NAME}: GET {url}/subjects answered {subjects!r}, not a list of subjects")
