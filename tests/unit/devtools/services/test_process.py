"""Service process management: failures name their cause; stop leaves nothing behind."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from jetspark.devtools.services import kafka, postgres, rabbitmq
from jetspark.devtools.services.endpoints import Endpoints
from jetspark.devtools.services.process import ensure_port_free, free_port, pid_alive, spawn, stop, wait_ready
from jetspark.errors import ServiceError
from jetspark.redaction import redact_dsn


def test_taken_port_is_named(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ServiceError, match=rf"kafka: port 127.0.0.1:{port} is already in use"):
            ensure_port_free(port, "kafka")
        with pytest.raises(ServiceError, match=rf"port 127.0.0.1:{port}"):
            kafka.start(tmp_path / "k", {"broker": port, "controller": free_port()})


def test_free_port_never_hands_out_a_port_twice_even_from_parallel_starts():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        ports = list(pool.map(lambda _: free_port(), range(400)))
    assert len(set(ports)) == len(ports)


def test_free_port_is_bindable_and_below_ephemeral_range():
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert port < low


def test_missing_postgres_binaries_are_named(tmp_path, monkeypatch):
    monkeypatch.setenv("JETSPARK_PG_BIN", str(tmp_path / "nowhere"))
    with pytest.raises(ServiceError, match=r"postgres: JETSPARK_PG_BIN=.*has no 'initdb'"):
        postgres.start(tmp_path / "pg")


def test_missing_rabbitmq_package_is_named():
    with pytest.raises(ServiceError, match="install Debian's 'rabbitmq-server' package"):
        rabbitmq._binary("rabbitmq-server-that-does-not-exist", ("/nonexistent/rabbitmq-server",))


def test_process_dying_during_startup_reports_its_log(tmp_path):
    proc = spawn([sys.executable, "-c", "print('boom: config invalid'); raise SystemExit(3)"],
                 log=tmp_path / "svc.log")
    with pytest.raises(ServiceError) as info:
        wait_ready("demo-service", proc, lambda: (_ for _ in ()).throw(OSError("refused")),
                   timeout_s=30)
    assert "demo-service exited during start-up" in str(info.value)
    assert "boom: config invalid" in str(info.value)


def test_not_ready_in_time_stops_process_and_reports(tmp_path):
    proc = spawn([sys.executable, "-c", "import time; print('still starting', flush=True); "
                  "time.sleep(600)"], log=tmp_path / "svc.log")
    with pytest.raises(ServiceError, match=r"(?s)did not become ready.*still starting"):
        wait_ready("slow-service", proc, lambda: (_ for _ in ()).throw(OSError("refused")),
                   timeout_s=1)
    assert not pid_alive(proc.pid)


def test_stop_kills_the_whole_process_group(tmp_path):
    script = ("import subprocess, sys, time; "
              "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
              "print(c.pid, flush=True); time.sleep(600)")
    proc = spawn([sys.executable, "-c", script], log=tmp_path / "svc.log")
    wait_ready("parent", proc, lambda: int((tmp_path / "svc.log").read_text().split()[0]),
               timeout_s=30)
    child = int((tmp_path / "svc.log").read_text().split()[0])
    assert pid_alive(child)
    stop(proc, grace_s=5)
    assert not pid_alive(proc.pid) and not pid_alive(child)


def test_redaction_hides_passwords():
    assert redact_dsn("postgresql://app:s3cret@db:5432/x") == "postgresql://app:***@db:5432/x"
    assert redact_dsn("host=db user=app password=s3cret dbname=x") == (
        "host=db user=app password=*** dbname=x")
    assert "s3cret" not in redact_dsn("amqp://guest:s3cret@127.0.0.1:5672/%2F")


def test_endpoints_round_trip_through_environment(monkeypatch):
    from jetspark.devtools.services.endpoints import ENV_VARS

    for key in ENV_VARS.values():  # the shell's own (a registry, a Spark master) are not these
        monkeypatch.delenv(key, raising=False)
    e = Endpoints("127.0.0.1:9092", "postgresql://u@h/db", "amqp://h")
    for key, value in e.as_env().items():
        monkeypatch.setenv(key, value)
    assert Endpoints.from_env() == e
