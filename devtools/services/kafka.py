"""A one-node Kafka (KRaft: broker and controller in one JVM) from Maven Central's jars."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from jetspark.devtools.maven import copy_dependencies
from jetspark.devtools.services.files import write_nofollow
from jetspark.devtools.services.process import ensure_port_free, free_port, spawn, wait_ready
from jetspark.devtools.services.registry import ServiceRecord, cache_dir
from jetspark.devtools.services.security import Login, ServerTls
from jetspark.errors import JetsparkError, ServiceError

NAME = "kafka"
KAFKA_VERSION = "4.2.0"
READY_TOPIC = "__jetspark_ready"
JVM_HEAP = os.environ.get("JETSPARK_KAFKA_HEAP", "1g")


def _resource(name: str) -> Path:
    return Path(str(resources.files("jetspark.devtools.services") / "resources" / name))


def libs_dir() -> Path:
    """Kafka's jars, resolved once with Maven into the cache (``JETSPARK_KAFKA_LIBS``)."""
    explicit = os.environ.get("JETSPARK_KAFKA_LIBS")
    if explicit:
        return Path(explicit)
    target = cache_dir() / f"kafka-{KAFKA_VERSION}" / "libs"
    if (target / f"kafka_2.13-{KAFKA_VERSION}.jar").exists():
        return target
    if shutil.which("mvn") is None:
        raise ServiceError(
            "kafka: Apache Kafka's jars are not cached and Maven ('mvn') is not installed to "
            "fetch them; install Maven or set JETSPARK_KAFKA_LIBS to a folder of Kafka jars"
        )
    try:
        copy_dependencies(_resource("kafka-pom.xml"), target, f"Kafka {KAFKA_VERSION} jars")
    except JetsparkError as e:
        raise ServiceError(f"kafka: {e}") from None
    return target


def tools_jar() -> Path:
    """Kafka's command-line tools jar (``kafka-tools``), resolved once into the cache; the
    tools run on :func:`libs_dir`'s jars plus this one (``JETSPARK_KAFKA_TOOLS_JAR``)."""
    explicit = os.environ.get("JETSPARK_KAFKA_TOOLS_JAR")
    if explicit:
        return Path(explicit)
    target = cache_dir() / f"kafka-tools-{KAFKA_VERSION}" / "libs"
    jar = target / f"kafka-tools-{KAFKA_VERSION}.jar"
    if not jar.exists():
        try:
            copy_dependencies(_resource("kafka-tools-pom.xml"), target, f"Kafka {KAFKA_VERSION} tools jar",
                              transitive=False)
        except JetsparkError as e:
            raise ServiceError(f"kafka: {e}") from None
    return jar


def tool_command(main: str, *args: str) -> list[str]:
    """The command line of one of Kafka's tools, as its ``bin/*.sh`` script runs it, e.g.
    ``tool_command(CONSUMER_GROUPS, "--bootstrap-server", bs, "--describe", "--group", g)``."""
    return _java(libs_dir(), main, *args, extra_classpath=(tools_jar(),))


CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
"""What ``kafka-consumer-groups.sh`` runs."""
SHARE_GROUPS = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
"""What ``kafka-share-groups.sh`` runs."""
SHARE_GROUPS = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
"""What ``kafka-share-groups.sh`` runs."""
FEATURES = "org.apache.kafka.tools.FeatureCommand"
"""What ``kafka-features.sh`` runs."""
VERSION_FILE = "kafka-version"
"""The Kafka version whose features a node's data dir is at (written beside ``log``)."""


def _server_properties(data_dir: Path, port: int, controller_port: int) -> str:
    return f"""\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs={data_dir / "log"}
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.retention.check.interval.ms=5000
"""


def _secured_properties(data_dir: Path, ports: dict[str, int], tls: ServerTls) -> str:
    """Two more listeners: ``SASL_SSL`` (SCRAM-SHA-512) and ``SSL`` requiring a client
    certificate (mTLS); the plain one stays for the broker itself."""
    keystore = data_dir / "keystore.pem"  # Kafka's PEM keystore: the key, then the chain
    write_nofollow(keystore, _pkcs8(tls.key.read_bytes()) + tls.certificate.read_text())
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    return f"""\
listeners=PLAINTEXT://127.0.0.1:{ports["broker"]},CONTROLLER://127.0.0.1:{ports["controller"]},\
SASL_SSL://127.0.0.1:{ports["sasl_ssl"]},SSL://127.0.0.1:{ports["ssl"]}
advertised.listeners=PLAINTEXT://127.0.0.1:{ports["broker"]},SASL_SSL://127.0.0.1:{ports["sasl_ssl"]},\
SSL://127.0.0.1:{ports["ssl"]}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL
ssl.keystore.type=PEM
ssl.keystore.location={keystore}
ssl.truststore.type=PEM
ssl.truststore.location={tls.ca}
listener.name.ssl.ssl.client.auth=required
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={scram}
"""


def _pkcs8(key_pem: bytes) -> str:
    """A PEM private key as unencrypted PKCS#8, the only form Kafka's PEM keystore reads."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(key_pem, password=None)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _java(libs: Path, main: str, *args: str, heap: str = "256m",
          extra_classpath: tuple[Path, ...] = ()) -> list[str]:
    java = shutil.which("java")
    if java is None:
        raise ServiceError("kafka: no 'java' on PATH; Kafka needs a Java 17+ runtime")
    return [
        java, f"-Xmx{heap}", "-Xms128m", "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={_resource('kafka-log4j2.xml')}",
        "-cp", os.pathsep.join([f"{libs}/*", *map(str, extra_classpath)]), main, *args,
    ]


def new_cluster_id() -> str:
    """A random KRaft cluster id: 16 bytes in URL-safe base64, never starting with ``-`` (the
    storage tool would read such an id as an option, as Kafka's own ``Uuid.randomUuid`` avoids)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def start(data_dir: Path, ports: dict[str, int] | None = None, *, tls: ServerTls | None = None,
          scram: Login | None = None, advertised_port: int | None = None) -> ServiceRecord:
    """Start the node in ``data_dir`` (formatting its storage on first start). With ``tls``
    (and ``scram``, a SCRAM-SHA-512 user) also a ``SASL_SSL`` listener (``ports["sasl_ssl"]``)
    and an mTLS one (``ports["ssl"]``). With ``advertised_port`` the plain listener is
    advertised there (a proxy in front of the node, which clients then reach through it)."""
    libs = libs_dir()
    ports = ports or {"broker": free_port(), "controller": free_port()}
    if tls is not None:
        ports.setdefault("sasl_ssl", free_port())
        ports.setdefault("ssl", free_port())
    for port in ports.values():
        ensure_port_free(port, NAME)
    data_dir.mkdir(parents=True, exist_ok=True)
    props = data_dir / "server.properties"
    text = _server_properties(data_dir, ports["broker"], ports["controller"])
    if tls is not None:  # later keys win in a properties file
        text += _secured_properties(data_dir, ports, tls)
    elif advertised_port is not None:
        text += f"advertised.listeners=PLAINTEXT://127.0.0.1:{advertised_port}\n"
    write_nofollow(props, text)
    log = data_dir / "kafka.log"
    fresh = not (data_dir / "log" / "meta.properties").exists()
    if fresh:
        fmt = subprocess.run(
            _java(libs, "kafka.tools.StorageTool", "format", "-t", new_cluster_id(), "-c", str(props)),
            capture_output=True, text=True, check=False,
        )
        if fmt.returncode != 0:
            raise ServiceError(f"kafka: formatting storage failed:\n{fmt.stdout}{fmt.stderr}")
    proc = spawn(_java(libs, "kafka.Kafka", str(props), heap=JVM_HEAP), log=log)
    endpoint = f"127.0.0.1:{ports['broker']}"
    wait_ready(NAME, proc, lambda: probe(endpoint), timeout_s=90)
    _upgrade_features(data_dir, endpoint, fresh)
    if tls is not None and scram is not None:
        _add_scram_user(endpoint, scram)
        secured = {"bootstrap.servers": f"127.0.0.1:{ports['sasl_ssl']}", "security.protocol": "SASL_SSL",
                   "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": scram.user,
                   "sasl.password": scram.password, "ssl.ca.location": str(tls.ca)}
        wait_ready(NAME, proc, lambda: _list_topics(secured), timeout_s=60)
    return ServiceRecord(NAME, endpoint, str(data_dir), dict(ports), (proc,))


def _upgrade_features(data_dir: Path, bootstrap: str, fresh: bool) -> None:
    """A data dir formatted by an older Kafka keeps that release's feature levels (its
    ``metadata.version``, no ``share.version``: no share groups) until they are upgraded: once
    per version change, ``kafka-features upgrade --release-version`` this release. Storage
    formatted by this release has them already."""
    marker = data_dir / VERSION_FILE
    if not fresh and not (marker.exists() and marker.read_text().strip() == KAFKA_VERSION):
        release = ".".join(KAFKA_VERSION.split(".")[:2])
        done = subprocess.run(tool_command(FEATURES, "--bootstrap-server", bootstrap, "upgrade",
                                           "--release-version", release),
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ServiceError(f"kafka: upgrading the features of {data_dir} to {release} failed:\n"
                               f"{done.stdout}{done.stderr}")
    write_nofollow(marker, KAFKA_VERSION + "\n")


def _add_scram_user(bootstrap: str, login: Login) -> None:
    """The SCRAM-SHA-512 user, made through the plain listener (not on a command line, where
    other local users could read the password)."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    upsert = UserScramCredentialUpsertion(login.user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                          login.password.encode())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=30)


def _list_topics(conf: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient

    AdminClient({**conf, "log_level": 0}).list_topics(timeout=3)


def probe(bootstrap: str, timeout_s: float = 10.0) -> None:
    """A produce and consume round trip through ``bootstrap``; raises when not ready."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    quiet = {"bootstrap.servers": bootstrap, "log_level": 0, "socket.timeout.ms": 2000}
    admin = AdminClient(quiet)
    futures = admin.create_topics([NewTopic(READY_TOPIC, 1, 1)], operation_timeout=timeout_s)
    try:
        futures[READY_TOPIC].result(timeout=timeout_s)
    except KafkaException as e:
        if "TOPIC_ALREADY_EXISTS" not in str(e):
            raise
    token = uuid.uuid4().hex.encode()
    producer = Producer({**quiet, "enable.idempotence": True})
    delivered: list = []
    producer.produce(READY_TOPIC, token, on_delivery=lambda err, msg: delivered.append((err, msg)))
    producer.flush(timeout_s)
    if not delivered or delivered[0][0] is not None:
        raise ServiceError(f"kafka: produce failed: {delivered[0][0] if delivered else 'timeout'}")
    offset = delivered[0][1].offset()
    consumer = Consumer({**quiet, "group.id": "__jetspark_ready", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(READY_TOPIC, 0, offset)])
        msg = consumer.poll(timeout_s)
        if msg is None or msg.error() or msg.value() != token:
            raise ServiceError(f"kafka: consume round trip failed: {msg and msg.error()}")
    finally:
        consumer.close()


@dataclass(frozen=True)
class ClusterLayout:
    """A KRaft cluster of combined broker+controller nodes (ids 1…n) on fixed local ports, so a
    node can be killed and started again on its own ports and data dir."""

    cluster_id: str
    brokers: tuple[int, ...]
    controllers: tuple[int, ...]
    min_insync_replicas: int = 2

    @classmethod
    def new(cls, nodes: int = 3, min_insync_replicas: int = 2) -> ClusterLayout:
        return cls(new_cluster_id(), tuple(free_port() for _ in range(nodes)),
                   tuple(free_port() for _ in range(nodes)), min_insync_replicas)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.brokers)


def _cluster_properties(layout: ClusterLayout, node_id: int, data_dir: Path) -> str:
    """One node's settings: every topic (internal ones too) replicated to all nodes, one
    partition each for transactions and groups (one broker coordinates them all)."""
    n = len(layout.brokers)
    port, controller = layout.brokers[node_id - 1], layout.controllers[node_id - 1]
    voters = ",".join(f"{i + 1}@127.0.0.1:{c}" for i, c in enumerate(layout.controllers))
    isr = layout.min_insync_replicas
    return f"""\
process.roles=broker,controller
node.id={node_id}
controller.quorum.voters={voters}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs={data_dir / "log"}
num.partitions=1
default.replication.factor={n}
min.insync.replicas={isr}
offsets.topic.replication.factor={n}
offsets.topic.num.partitions=1
transaction.state.log.replication.factor={n}
transaction.state.log.min.isr={isr}
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor={n}
share.coordinator.state.topic.min.isr={isr}
group.initial.rebalance.delay.ms=0
unclean.leader.election.enable=false
"""


def start_cluster_node(layout: ClusterLayout, node_id: int, data_dir: Path, *, heap: str = "512m",
                       wait: bool = True) -> ServiceRecord:
    """Start node ``node_id`` of ``layout`` in ``data_dir`` (formatting its storage on first
    start). ``wait``: until the cluster lists it as a broker (a first start of the cluster
    needs a quorum: start every node with ``wait=False``, then :func:`wait_cluster_node`)."""
    libs = libs_dir()
    for port in (layout.brokers[node_id - 1], layout.controllers[node_id - 1]):
        ensure_port_free(port, NAME)
    data_dir.mkdir(parents=True, exist_ok=True)
    props = data_dir / "server.properties"
    write_nofollow(props, _cluster_properties(layout, node_id, data_dir))
    if not (data_dir / "log" / "meta.properties").exists():
        fmt = subprocess.run(
            _java(libs, "kafka.tools.StorageTool", "format", "-t", layout.cluster_id, "-c", str(props)),
            capture_output=True, text=True, check=False,
        )
        if fmt.returncode != 0:
            raise ServiceError(f"kafka: formatting node {node_id}'s storage failed:\n"
                               f"{fmt.stdout}{fmt.stderr}")
    proc = spawn(_java(libs, "kafka.Kafka", str(props), heap=heap), log=data_dir / "kafka.log")
    ports = {"broker": layout.brokers[node_id - 1], "controller": layout.controllers[node_id - 1]}
    record = ServiceRecord(f"{NAME}-{node_id}", f"127.0.0.1:{ports['broker']}", str(data_dir), ports, (proc,))
    if wait:
        wait_cluster_node(layout, node_id, record)
    return record


def wait_cluster_node(layout: ClusterLayout, node_id: int, record: ServiceRecord,
                      timeout_s: float = 120) -> None:
    """Until the node, asked directly, lists itself among the cluster's brokers."""
    from confluent_kafka.admin import AdminClient

    def registered() -> None:
        admin = AdminClient({"bootstrap.servers": record.endpoint, "log_level": 0, "socket.timeout.ms": 2000})
        if node_id not in admin.list_topics(timeout=3).brokers:
            raise ServiceError(f"kafka: node {node_id} is not registered yet")

    wait_ready(record.name, record.processes[0], registered, timeout_s=timeout_s)
