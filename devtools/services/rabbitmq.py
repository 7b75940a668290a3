"""A RabbitMQ node from Debian's package, with its own epmd, ports and data directory."""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

from jetspark.devtools.services.files import write_nofollow
from jetspark.devtools.services.process import ensure_port_free, free_port, spawn, stop, wait_ready
from jetspark.devtools.services.registry import ServiceRecord
from jetspark.devtools.services.security import Login, ServerTls
from jetspark.errors import ServiceError

NAME = "rabbitmq"
PASSWORD_FILE = "amqp-password"
USER = "jetspark"


def _binary(name: str, candidates: tuple[str, ...]) -> str:
    for path in candidates:
        if os.access(path, os.X_OK):
            return path
    found = shutil.which(name)
    if found:
        return found
    raise ServiceError(
        f"rabbitmq: '{name}' not found (looked in {', '.join(candidates)} and PATH); "
        "install Debian's 'rabbitmq-server' package"
    )


def _tls_conf(tls: ServerTls, port: int) -> str:
    """An ``amqps`` listener beside the plain one. Clients may present a certificate:
    ``EXTERNAL`` logs them in as the user named by its common name."""
    return (
        f"listeners.ssl.1 = 127.0.0.1:{port}\n"
        f"ssl_options.cacertfile = {tls.ca}\n"
        f"ssl_options.certfile = {tls.certificate}\n"
        f"ssl_options.keyfile = {tls.key}\n"
        "ssl_options.verify = verify_peer\n"
        "ssl_options.fail_if_no_peer_cert = false\n"
        "auth_mechanisms.1 = PLAIN\n"
        "auth_mechanisms.2 = EXTERNAL\n"
        "ssl_cert_login_from = common_name\n"
    )


def start(data_dir: Path, ports: dict[str, int] | None = None, *, tls: ServerTls | None = None,
          login: Login | None = None) -> ServiceRecord:
    """Start epmd and a node in ``data_dir``; the node keeps its queues across restarts.
    With ``tls``, also an ``amqps`` listener (port ``ports["amqps"]``); ``login``: the
    default user (without: :func:`own_login`, never guest/guest)."""
    server = _binary("rabbitmq-server", ("/usr/lib/rabbitmq/bin/rabbitmq-server",))
    epmd = _binary("epmd", ("/usr/bin/epmd", "/usr/lib/erlang/bin/epmd"))
    ports = ports or {"amqp": free_port(), "dist": free_port(), "epmd": free_port()}
    if tls is not None:
        ports.setdefault("amqps", free_port())
    for port in ports.values():
        ensure_port_free(port, NAME)
    data_dir.mkdir(parents=True, exist_ok=True)
    login = login or own_login(data_dir)
    write_nofollow(data_dir / "enabled_plugins",
                   "[rabbitmq_auth_mechanism_ssl].\n" if tls is not None else "[].\n")
    write_nofollow(
        data_dir / "rabbitmq.conf",
        "loopback_users = none\n"
        # Erlang distribution (how rabbitmqctl reaches the node) on loopback only.
        "distribution.listener.interface = 127.0.0.1\n"
        # Publishers in tests and benchmarks are local: never block them on disk space.
        "disk_free_limit.absolute = 50MB\n"
        + (_tls_conf(tls, ports["amqps"]) if tls is not None else "")
        + f"default_user = {login.user}\ndefault_pass = {login.password}\n"
    )
    env = {
        "HOME": str(data_dir),  # the Erlang cookie lives here
        "ERL_EPMD_PORT": str(ports["epmd"]),
        "ERL_EPMD_ADDRESS": "127.0.0.1",  # epmd listens on loopback only
        "RABBITMQ_NODENAME": f"jetspark{ports['amqp']}@localhost",
        "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
        "RABBITMQ_NODE_PORT": str(ports["amqp"]),
        "RABBITMQ_DIST_PORT": str(ports["dist"]),
        "RABBITMQ_MNESIA_BASE": str(data_dir / "mnesia"),
        "RABBITMQ_LOG_BASE": str(data_dir / "log"),
        "RABBITMQ_CONFIG_FILE": str(data_dir / "rabbitmq"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(data_dir / "enabled_plugins"),
        "RABBITMQ_PID_FILE": str(data_dir / "rabbitmq.pid"),
        "RABBITMQ_LOGS": "-",
    }
    epmd_proc = spawn([epmd, "-port", str(ports["epmd"])], log=data_dir / "epmd.log", env=env)
    node = spawn([server], log=data_dir / "rabbitmq.log", env=env, cwd=data_dir)
    endpoint = f"amqp://{login.user}:{login.password}@127.0.0.1:{ports['amqp']}/%2F"
    try:
        wait_ready(NAME, node, lambda: probe(endpoint), timeout_s=90)
    except ServiceError:
        stop(epmd_proc)
        raise
    # The node first, then its epmd: stop() goes through processes in this order.
    return ServiceRecord(NAME, endpoint, str(data_dir), dict(ports), (node, epmd_proc))


def own_login(data_dir: Path) -> Login:
    """The node's user when none is given: ``jetspark`` with a random password kept in
    ``data_dir`` (0600), so a restart of the node, which keeps the users it made at its first
    start, logs in with the same one. Never RabbitMQ's guest/guest: ``loopback_users = none``
    (the proxies of the fault tests connect from loopback) would let any local user in as an
    administrator."""
    path = data_dir / PASSWORD_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        password = secrets.token_hex(16)
        write_nofollow(path, password)
        return Login(USER, password)
    with os.fdopen(fd) as f:
        return Login(USER, f.read().strip())


def probe(url: str) -> None:
    """Open a connection and a channel at ``url``; raises when not ready."""
    import pika

    params = pika.URLParameters(url)
    params.socket_timeout = 3
    params.blocked_connection_timeout = 3
    params.connection_attempts = 1
    conn = pika.BlockingConnection(params)
    try:
        conn.channel().close()
    finally:
        conn.close()
