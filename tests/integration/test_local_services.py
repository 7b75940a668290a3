"""Local services in a run directory of their own: idempotent start, restart, clean stop."""

from __future__ import annotations

import base64
import os
import tempfile
from pathlib import Path

import pika
import psycopg
import pytest

from jetspark.devtools.services import local, rabbitmq
from jetspark.devtools.services.process import pid_alive
from jetspark.devtools.services.registry import Registry

pytestmark = pytest.mark.integration


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(int(entry))
    return found


# 127.0.0.1 and ::1 as /proc/net/tcp{,6} write them (32-bit words in host byte order)
LOOPBACK = {"0100007F", "00000000000000000000000001000000"}


def _listening_addresses(port: int) -> set[str]:
    """The local addresses of the TCP sockets listening on ``port`` (IPv4 and IPv6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local_address, state = line.split()[1], line.split()[3]
            address, hex_port = local_address.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


@pytest.fixture
def own_run_dir(monkeypatch):
    # Not under pytest's tmp_path: PostgreSQL runs as 'postgres' when we are root and
    # must be able to reach its data directory.
    path = Path(tempfile.mkdtemp(prefix="jetspark-lifecycle-"))
    path.chmod(0o755)
    monkeypatch.setenv("JETSPARK_RUN_DIR", str(path))
    yield path
    local.down(Registry(path).load())  # every service the test started (the registry too), by name


def test_up_is_idempotent_restart_keeps_data_down_leaves_nothing(own_run_dir):
    endpoints, started = local.up(["postgres", "rabbitmq"])
    assert sorted(started) == ["postgres", "rabbitmq"]
    again, started_again = local.up(["postgres", "rabbitmq"])
    assert started_again == [] and again == endpoints

    with psycopg.connect(endpoints.pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (v int)")
        conn.execute("INSERT INTO kept VALUES (42)")
    before = Registry(own_run_dir).load()["postgres"]
    after = local.restart("postgres")
    assert after.ports == before.ports and after.processes[0].pid != before.processes[0].pid
    with psycopg.connect(endpoints.pg_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT v FROM kept").fetchall() == [(42,)]

    rabbitmq.probe(endpoints.amqp_url)
    # guest/guest is no way in (loopback_users = none would let any local user in with it),
    # and the node's own user survives a restart of the node, which keeps its users
    host = endpoints.amqp_url.split("@", 1)[1]
    with pytest.raises((pika.exceptions.ProbableAuthenticationError, pika.exceptions.AuthenticationError)):
        rabbitmq.probe(f"amqp://guest:guest@{host}")
    local.restart("rabbitmq")
    rabbitmq.probe(endpoints.amqp_url)
    ports = Registry(own_run_dir).load()["rabbitmq"].ports
    for name in ("epmd", "dist", "amqp"):
        found = _listening_addresses(ports[name])
        assert found and found <= LOOPBACK, f"rabbitmq's {name} port listens on {found}"
    assert _processes_mentioning(str(own_run_dir)), "services should run from the run dir"
    pids = [p.pid for rec in Registry(own_run_dir).load().values() for p in rec.processes]
    assert len(pids) == 3  # postgres, the RabbitMQ node and its own epmd
    assert sorted(local.down()) == ["postgres", "rabbitmq"]
    assert not any(pid_alive(pid) for pid in pids)
    assert _processes_mentioning(str(own_run_dir)) == []
    assert Registry(own_run_dir).load() == {}


def test_services_env_prints_no_password_and_evaluates_to_a_url_that_connects(own_run_dir):
    """``eval "$(jetspark services env)"`` (README, Makefile) gives a working AMQP URL, read from
    the password file; the printed lines of up, env and status hold no password."""
    import subprocess
    import sys

    endpoints, _ = local.up(["rabbitmq"])
    password = (own_run_dir / "rabbitmq" / rabbitmq.PASSWORD_FILE).read_text().strip()
    assert f":{password}@" in endpoints.amqp_url
    cli = str(Path(sys.executable).parent / "jetspark")
    printed = {action: subprocess.run([cli, "services", *action], check=True, capture_output=True,
                                      text=True).stdout
               for action in (("up", "rabbitmq"), ("env",), ("status",))}
    for action, text in printed.items():
        assert password not in text, action
    assert "export JETSPARK_AMQP_URL=" in printed[("env",)]
    assert "export JETSPARK_AMQP_URL=" in printed[("up", "rabbitmq")]
    script = f'eval "$({cli} services env)"; printf %s "$JETSPARK_AMQP_URL"'
    evaluated = subprocess.run(["bash", "-c", script], check=True, capture_output=True, text=True).stdout
    assert evaluated == endpoints.amqp_url
    rabbitmq.probe(evaluated)


def test_the_local_schema_registry_takes_its_password_only(own_run_dir):
    """The local Schema Registry listens on a Unix socket in a 0700 folder only; its TCP port is
    a gate that answers 401 without user ``jetspark`` and the password of ``registry-password``
    (0600), and forwards with it. ``services env`` prints the URL without the password, and it
    evaluates to one confluent-kafka's client and jetspark's read with."""
    import stat
    import subprocess
    import sys
    import urllib.error
    import urllib.parse
    import urllib.request

    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    from jetspark.devtools.services import schema_registry
    from jetspark.options import Options
    from jetspark.schemas.registry import RegistryClient, RegistrySettings, SchemaRegistryError

    endpoints, _ = local.up(["registry"])
    data = own_run_dir / "registry"
    password = (data / schema_registry.PASSWORD_FILE).read_text().strip()
    assert stat.S_IMODE((data / schema_registry.PASSWORD_FILE).stat().st_mode) == 0o600
    assert stat.S_IMODE((data / schema_registry.SOCKET).parent.stat().st_mode) == 0o700
    parts = urllib.parse.urlsplit(endpoints.schema_registry_url)
    assert (parts.username, parts.password) == ("jetspark", password)
    java = Registry(own_run_dir).load()["registry"].processes[1].pid
    assert not [line for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
                if line.split()[3] == "0A" and _listens(java, line)], "the server has a TCP port"
    bare = f"http://127.0.0.1:{parts.port}{parts.path}/subjects"
    for auth in (None, "jetspark:wrong", f"other:{password}"):
        request = urllib.request.Request(bare)
        if auth is not None:
            request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 401, auth
    theirs = SchemaRegistryClient({"url": endpoints.schema_registry_url})
    schema_id = theirs.register_schema("gate-value", Schema('"string"', "AVRO"))
    settings = RegistrySettings.parse(Options({"schemaRegistry.url": endpoints.schema_registry_url}))
    ours = RegistryClient(settings)
    assert ours.schema(schema_id).text == '"string"'
    bare_url = f"http://127.0.0.1:{parts.port}{parts.path}"  # the option instead of the URL's user info
    for user_info, works in ((f"jetspark:{password}", True), ("jetspark:not-the-password", False)):
        settings = RegistrySettings.parse(Options({"schemaRegistry.url": bare_url,
                                                   "schemaRegistry.basic.auth.user.info": user_info}))
        if works:
            assert RegistryClient(settings).schema(schema_id).text == '"string"'
            continue
        with pytest.raises(SchemaRegistryError) as refused:
            RegistryClient(settings).schema(schema_id)
        text = str(refused.value)
        assert "HTTP 401" in text and "schemaRegistry.basic.auth.user.info" in text, text
        assert "not-the-password" not in text and password not in text
    cli = str(Path(sys.executable).parent / "jetspark")
    printed = subprocess.run([cli, "services", "env", "registry"], check=True, capture_output=True,
                             text=True).stdout
    assert password not in printed and "JETSPARK_SCHEMA_REGISTRY_URL" in printed
    script = f'eval "$({cli} services env registry)"; printf %s "$JETSPARK_SCHEMA_REGISTRY_URL"'
    evaluated = subprocess.run(["bash", "-c", script], check=True, capture_output=True, text=True).stdout
    assert evaluated == endpoints.schema_registry_url
    schema_registry.probe(evaluated)
    gate = Registry(own_run_dir).load()["registry"].processes[0].pid
    assert local.down(["registry"]) == ["registry"]
    assert not pid_alive(java) and not pid_alive(gate), "services down left the server or its gate running"


def _listens(pid: int, line: str) -> bool:
    """Whether the listening socket of a /proc/net/tcp line is one of ``pid``'s."""
    inode = line.split()[9]
    return any(os.readlink(fd) == f"socket:[{inode}]" for fd in Path(f"/proc/{pid}/fd").iterdir()
               if fd.is_symlink())
