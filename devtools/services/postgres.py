"""A PostgreSQL server from Debian's package, in a data directory of its own."""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import signal
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

from jetspark.devtools.services.files import write_nofollow
from jetspark.devtools.services.process import ensure_port_free, free_port, spawn, wait_ready
from jetspark.devtools.services.registry import ServiceRecord
from jetspark.devtools.services.security import ServerTls
from jetspark.errors import ServiceError
from jetspark.redaction import redact_dsn

NAME = "postgres"
USER = "jetspark"
DATABASE = "jetspark"
MAX_PREPARED_TRANSACTIONS = 64
PASSFILE = "pgpass"


def bin_dir() -> Path:
    """The newest installed server's binaries (``JETSPARK_PG_BIN`` overrides)."""
    explicit = os.environ.get("JETSPARK_PG_BIN")
    if explicit:
        if not (Path(explicit) / "initdb").exists():
            raise ServiceError(f"postgres: JETSPARK_PG_BIN={explicit} has no 'initdb'")
        return Path(explicit)
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0,
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).resolve().parent
    raise ServiceError(
        "postgres: no PostgreSQL server found (no /usr/lib/postgresql/*/bin/initdb, no initdb "
        "on PATH); install Debian's 'postgresql' package or set JETSPARK_PG_BIN"
    )


def _os_user() -> str | None:
    """PostgreSQL refuses to run as root: then run it as the 'postgres' system user."""
    if os.getuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise ServiceError(
            "postgres: running as root and there is no 'postgres' system user to run the "
            "server as; install Debian's 'postgresql' package"
        ) from None
    return "postgres"


def _chown(path: Path, user: str | None) -> None:
    if user is None:
        return
    entry = pwd.getpwnam(user)
    for root, dirs, files in os.walk(path):
        os.chown(root, entry.pw_uid, entry.pw_gid, follow_symlinks=False)
        for name in dirs + files:
            os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid, follow_symlinks=False)


def start(data_dir: Path, ports: dict[str, int] | None = None, *, tls: ServerTls | None = None,
          password: str | None = None) -> ServiceRecord:
    """Start a server in ``data_dir``, running ``initdb`` there on first start.

    Every connection authenticates with ``scram-sha-256``: the superuser's password is
    ``password``, else one made at ``initdb``; it is kept in ``data_dir/pgpass`` (0600, libpq's
    password file), which the endpoint names (``?passfile=…``), so no DSN shown anywhere carries
    it. ``tls``: connections over TCP must use TLS (``hostssl`` only). A data directory made
    before passwords were used (no ``pgpass``) keeps its ``trust``."""
    binaries = bin_dir()
    user = _os_user()
    ports = ports or {"server": free_port()}
    ensure_port_free(ports["server"], NAME)
    data_dir.mkdir(parents=True, exist_ok=True)
    pgdata = data_dir / "data"
    sockets = data_dir / "sockets"
    sockets.mkdir(exist_ok=True)
    settings: dict[str, object] = {
        "listen_addresses": "127.0.0.1",
        "port": ports["server"],
        "unix_socket_directories": str(sockets),
        "max_prepared_transactions": MAX_PREPARED_TRANSACTIONS,
        "max_connections": 200,
        "logging_collector": "off",
    }
    if tls is not None:
        settings.update(_tls_files(tls, data_dir / "tls"))
    passfile = data_dir / PASSFILE
    if not (pgdata / "PG_VERSION").exists():
        _initdb(binaries, data_dir, user, password or secrets.token_hex(16), tls is not None)
    else:
        _chown(data_dir, user)
    argv = [str(binaries / "postgres"), "-D", str(pgdata)]
    for key, value in settings.items():
        argv += ["-c", f"{key}={value}"]
    log = data_dir / "postgres.log"
    proc = spawn(argv, log=log, user=user, stop_signal=signal.SIGINT)
    params = [f"passfile={quote(str(passfile), safe='/')}"] if passfile.exists() else []
    params += ["sslmode=require"] if tls is not None else []
    query = f"?{'&'.join(params)}" if params else ""
    admin_dsn = f"postgresql://{USER}@127.0.0.1:{ports['server']}/postgres{query}"
    wait_ready(NAME, proc, lambda: _create_database(admin_dsn), timeout_s=60)
    endpoint = f"postgresql://{USER}@127.0.0.1:{ports['server']}/{DATABASE}{query}"
    wait_ready(NAME, proc, lambda: probe(endpoint), timeout_s=30)
    return ServiceRecord(NAME, endpoint, str(data_dir), dict(ports), (proc,))


def _initdb(binaries: Path, data_dir: Path, user: str | None, password: str, tls_only: bool) -> None:
    """A new cluster in ``data_dir/data``: ``scram-sha-256`` everywhere (TCP over TLS only
    with ``tls_only``); the password in ``data_dir/pgpass`` (libpq's password file, 0600). The
    password reaches initdb through a file that is removed whatever happens."""
    pgdata, pwfile = data_dir / "data", data_dir / "initdb-password"
    write_nofollow(pwfile, password + "\n")
    try:
        _chown(data_dir, user)
        init = subprocess.run(
            [str(binaries / "initdb"), "-D", str(pgdata), "-U", USER, "--auth=scram-sha-256",
             f"--pwfile={pwfile}", "-E", "UTF8", "--locale=C", "--no-sync"],
            capture_output=True, text=True, check=False, user=user,
        )
    finally:
        pwfile.unlink(missing_ok=True)
    if init.returncode != 0:
        raise ServiceError(f"postgres: initdb failed:\n{init.stdout}{init.stderr}")
    if tls_only:
        write_nofollow(pgdata / "pg_hba.conf",
                       "local all all scram-sha-256\nhostssl all all 127.0.0.1/32 scram-sha-256\n"
                       "hostnossl all all 0.0.0.0/0 reject\n")
        _chown(pgdata, user)
    write_nofollow(data_dir / PASSFILE, f"*:*:*:{USER}:{password}\n")  # the client's: stays ours


def _tls_files(tls: ServerTls, into: Path) -> dict[str, str]:
    """The server's certificate and key copied where the server's user may read them (the key
    0600, as PostgreSQL demands); its settings."""
    into.mkdir(parents=True, exist_ok=True)
    cert, key = into / "server.pem", into / "server.key"
    write_nofollow(cert, tls.certificate.read_text())
    write_nofollow(key, tls.key.read_text())
    os.chmod(key, 0o600)
    return {"ssl": "on", "ssl_cert_file": str(cert), "ssl_key_file": str(key)}


def password_of(dsn: str) -> str | None:
    """The password a ``postgresql://`` DSN logs in with: its own, else the first line of its
    ``passfile`` (local services write one line); None without either."""
    parts = urlsplit(dsn)
    if parts.password:
        return unquote(parts.password)
    passfile = parse_qs(parts.query).get("passfile")
    if not passfile:
        return None
    return Path(passfile[0]).read_text().splitlines()[0].split(":", 4)[4]


def jdbc_url(dsn: str) -> tuple[str, dict[str, str]]:
    """The JDBC URL and properties (driver, user, password) of a ``postgresql://`` DSN, for
    Spark's own ``format("jdbc")``, which knows no ``passfile``."""
    parts = urlsplit(dsn)
    props = {"driver": "org.postgresql.Driver", "user": parts.username or "postgres"}
    password = password_of(dsn)
    if password:
        props["password"] = password
    return f"jdbc:postgresql://{parts.hostname}:{parts.port or 5432}{parts.path}", props


def _create_database(admin_dsn: str) -> None:
    import psycopg

    with psycopg.connect(admin_dsn, autocommit=True, connect_timeout=3) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE}"')


def probe(dsn: str) -> None:
    """A query through ``dsn`` and the check that prepared transactions are enabled."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True, connect_timeout=3) as conn:
        value = conn.execute("SHOW max_prepared_transactions").fetchone()[0]
        if int(value) <= 0:
            raise ServiceError(
                f"postgres at {redact_dsn(dsn)}: max_prepared_transactions = {value}; the "
                "jetjdbc sink with commit=two-phase needs it > 0 (set it in postgresql.conf and restart)"
            )
