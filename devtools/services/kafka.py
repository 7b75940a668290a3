"""A one-node Kafka (KRaft: broker and controller in one JVM) from Maven Central's jars."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import uuid
from importlib import resources
from pathlib import Path

from jetspark.devtools.maven import copy_dependencies
from jetspark.devtools.services.files import write_nofollow
from jetspark.devtools.services.process import ensure_port_free, free_port, spawn, wait_ready
from jetspark.devtools.services.registry import ServiceRecord, cache_dir
from jetspark.errors import JetsparkError, ServiceError

NAME = "kafka"
KAFKA_VERSION = "4.1.1"
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


def start(data_dir: Path, ports: dict[str, int] | None = None) -> ServiceRecord:
    """Start the node in ``data_dir`` (formatting its storage on first start)."""
    libs = libs_dir()
    ports = ports or {"broker": free_port(), "controller": free_port()}
    for port in ports.values():
        ensure_port_free(port, NAME)
    data_dir.mkdir(parents=True, exist_ok=True)
    props = data_dir / "server.properties"
    write_nofollow(props, _server_properties(data_dir, ports["broker"], ports["controller"]))
    log = data_dir / "kafka.log"
    if not (data_dir / "log" / "meta.properties").exists():
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        fmt = subprocess.run(
            _java(libs, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props)),
            capture_output=True, text=True, check=False,
        )
        if fmt.returncode != 0:
            raise ServiceError(f"kafka: formatting storage failed:\n{fmt.stdout}{fmt.stderr}")
    proc = spawn(_java(libs, "kafka.Kafka", str(props), heap=JVM_HEAP), log=log)
    endpoint = f"127.0.0.1:{ports['broker']}"
    wait_ready(NAME, proc, lambda: probe(endpoint), timeout_s=90)
    return ServiceRecord(NAME, endpoint, str(data_dir), dict(ports), (proc,))


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
