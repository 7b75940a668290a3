"""Services the fault tests may break: a private Kafka broker, a three-node KRaft cluster and a
private PostgreSQL server, each on its own ports and data dir (never the shared services), and
the checks every fault test ends with (nothing open or prepared left behind)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

from jetspark.devtools.services import kafka, postgres, process
from jetspark.devtools.services.process import stop
from jetspark.devtools.services.registry import ServiceRecord


def _kill(record: ServiceRecord, sig: int = signal.SIGKILL, timeout_s: float = 60) -> None:
    """``sig`` to each process of ``record``; returns once each is reaped. A JVM's main thread
    turns zombie while its other threads still exit holding the sockets, so "a zombie" is not
    yet "gone": a restart on the same ports would find them taken."""
    for proc in record.processes:
        stop(dataclasses.replace(proc, stop_signal=sig), grace_s=30)
        deadline = time.monotonic() + timeout_s
        while os.path.exists(f"/proc/{proc.pid}"):
            assert time.monotonic() < deadline, f"{record.name} (pid {proc.pid}) not reaped in {timeout_s} s"
            process._reap()
            time.sleep(0.05)


class PrivateKafka:
    """One KRaft broker of our own: SIGKILLed and started again on the same ports and log dir.
    With ``ports`` and ``advertised_port``, clients are sent to that port (a proxy in front)."""

    def __init__(self, data_dir: Path, ports: dict[str, int] | None = None,
                 advertised_port: int | None = None) -> None:
        self.data_dir = data_dir
        self.ports = ports
        self.advertised_port = advertised_port
        self.record: ServiceRecord | None = None

    @property
    def bootstrap(self) -> str:
        assert self.record is not None, "broker not started"
        if self.advertised_port is not None:
            return f"127.0.0.1:{self.advertised_port}"
        return self.record.endpoint

    def start(self) -> None:
        self.record = kafka.start(self.data_dir, dict(self.ports) if self.ports else None,
                                  advertised_port=self.advertised_port)
        self.ports = dict(self.record.ports)

    def kill(self) -> None:
        """SIGKILL, as a crashed machine: no flush, no controlled shutdown."""
        assert self.record is not None
        _kill(self.record)

    def stop(self) -> None:
        if self.record is not None:
            for proc in self.record.processes:
                stop(proc)
            self.record = None
        shutil.rmtree(self.data_dir, ignore_errors=True)


class KafkaCluster:
    """Three combined broker+controller nodes: every topic replicated three times,
    ``min.insync.replicas=2``, one partition each for transaction and group state."""

    def __init__(self, data_dir: Path, nodes: int = 3) -> None:
        self.data_dir = data_dir
        self.layout = kafka.ClusterLayout.new(nodes)
        self.records: dict[int, ServiceRecord] = {}

    @property
    def bootstrap(self) -> str:
        return self.layout.bootstrap

    def node_ids(self) -> list[int]:
        return list(range(1, len(self.layout.brokers) + 1))

    def start(self) -> None:
        for node in self.node_ids():
            self.records[node] = kafka.start_cluster_node(self.layout, node, self.data_dir / f"node-{node}",
                                                          wait=False)
        for node, record in self.records.items():
            kafka.wait_cluster_node(self.layout, node, record)

    def kill(self, node: int) -> None:
        _kill(self.records.pop(node))

    def leaders(self, topic: str) -> dict[int, int]:
        """Partition → leader node id, as the cluster's metadata says now."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        meta = admin.list_topics(topic, timeout=30).topics[topic]
        assert meta.error is None, meta.error
        return {p: info.leader for p, info in meta.partitions.items()}

    def create_topic(self, name: str, partitions: int, leader: int) -> None:
        """A topic replicated to every node, ``leader`` the preferred (and first) leader of
        every partition."""
        from confluent_kafka.admin import AdminClient, NewTopic

        others = [n for n in self.node_ids() if n != leader]
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        topic = NewTopic(name, partitions, replica_assignment=[[leader, *others]] * partitions)
        admin.create_topics([topic], operation_timeout=30)[name].result(timeout=30)
        deadline = time.monotonic() + 30
        while set(self.leaders(name).values()) != {leader}:
            assert time.monotonic() < deadline, f"{name}: leaders {self.leaders(name)}, not node {leader}"
            time.sleep(0.2)

    def stop(self) -> None:
        for record in self.records.values():
            for proc in record.processes:
                stop(proc, grace_s=5)
        self.records.clear()
        shutil.rmtree(self.data_dir, ignore_errors=True)


def create_topic(bootstrap: str, name: str, partitions: int, replicas: int = 1) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, replicas)], operation_timeout=30)[name].result(timeout=30)
    return name


def open_transaction_partitions(bootstrap: str, topics: Iterable[str]
                                ) -> dict[tuple[str, int], tuple[int, int]]:
    """Partitions whose last stable offset is behind their high watermark — held by an open
    transaction — with both offsets. Empty when every transaction ended."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = {}
    for topic in topics:
        meta = admin.list_topics(topic, timeout=30).topics[topic]
        request.update({TopicPartition(topic, p): OffsetSpec.latest() for p in meta.partitions})

    def ends(level) -> dict[tuple[str, int], int]:
        futures = admin.list_offsets(request, isolation_level=level, request_timeout=30)
        return {(tp.topic, tp.partition): f.result(timeout=35).offset for tp, f in futures.items()}

    stable, high = ends(IsolationLevel.READ_COMMITTED), ends(IsolationLevel.READ_UNCOMMITTED)
    return {tp: (stable[tp], high[tp]) for tp in high if stable[tp] != high[tp]}


def ongoing_transactions(bootstrap: str, prefix: str) -> list[str]:
    """Lines of Kafka's transactions tool (``kafka-transactions.sh list``) for transactional
    ids starting with ``prefix`` that are not in a completed state (Empty, CompleteCommit,
    CompleteAbort, Dead)."""
    out = subprocess.run(kafka.tool_command("org.apache.kafka.tools.TransactionsCommand",
                                            "--bootstrap-server", bootstrap, "list"),
                         capture_output=True, text=True, timeout=120, check=True).stdout
    done = ("Empty", "CompleteCommit", "CompleteAbort", "Dead")
    # columns: TransactionalId, Coordinator, ProducerId, TransactionState (tab-separated, padded)
    return [line for line in out.splitlines() if line.startswith(prefix) and line.split()[-1] not in done]


class PrivatePostgres:
    """A PostgreSQL server of our own (Debian's binaries, like the local service) that is shut
    down the hard way (``pg_ctl stop -m immediate``: no checkpoint, crash recovery at the next
    start) and started again on the same port and data dir."""

    def __init__(self, data_dir: Path) -> None:
        from tests.integration.scripts.sink_pg import PrivateServer

        self.server = PrivateServer(data_dir)

    @property
    def dsn(self) -> str:
        return self.server.dsn

    def start(self) -> None:
        self.server.start()

    def crash(self) -> None:
        """``pg_ctl stop -m immediate`` (SIGQUIT to the postmaster): every backend dies at
        once, prepared transactions survive in the WAL."""
        record = self.server.record
        assert record is not None
        pgdata = self.server.data_dir / "data"
        subprocess.run([str(postgres.bin_dir() / "pg_ctl"), "stop", "-m", "immediate", "-D", str(pgdata)],
                       user=postgres._os_user(), capture_output=True, text=True, timeout=60, check=True)
        _kill(record, signal.SIGQUIT)  # reaps the postmaster (already gone)
        self.server.record = None

    def crash_and_restart(self) -> None:
        self.crash()
        self.server.start()

    def stop(self) -> None:
        self.server.stop()
        shutil.rmtree(self.server.data_dir, ignore_errors=True)
