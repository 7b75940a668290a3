"""``jetspark inspect``: live numbers from the services a checkpoint's query uses (read-only).

- jetkafka: each partition's lag, the broker's end offset (high watermark) minus the
  committed offset, the next offset after the last committed batch (the records the query
  has not committed yet, as a consumer group's lag counts them);
- jetrabbitmq: the queue's ready count (a passive ``queue_declare`` over AMQP: any user of the
  queue can do it) and consumers; the unacked count only from the management plugin's HTTP API
  when its URL is given (``rabbitmqctl`` needs the node's Erlang cookie, which a user of the
  broker rarely has). Without the API, ``walMessages`` counts the messages in the write-ahead
  log under ``walLocation``: the deliveries the query took and has not acked yet (on a running
  query they are what the broker shows as unacked; on a stopped one they are back in the queue
  and are acked as duplicates by the next run). Also the WAL, dedup store and lease files;
- jetjdbc ``commit=two-phase``: the sink's prepared transactions (``pg_prepared_xacts``, gid
  ``jetspark:<sinkId>:<batch>:<partition>:<attempt>``) with their age.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from jetspark.errors import ServiceError
from jetspark.http_redirects import SameOriginRedirects
from jetspark.inspect.storage import Folder, open_folder
from jetspark.redaction import redact_dsn, scrub


@dataclass(frozen=True)
class PartitionLag:
    """A Kafka partition: the query's committed offset (next offset after the last committed
    batch) and the broker's end offset (high watermark)."""

    topic: str
    partition: int
    offset: int
    low: int
    end: int

    @property
    def lag(self) -> int:
        return max(0, self.end - self.offset)


def kafka_lag(bootstrap: str | None, offsets: Iterable[tuple[str, int, int]], *, timeout_s: float = 10.0,
              config: Mapping[str, str] | None = None) -> list[PartitionLag]:
    """Lags of ``(topic, partition, next offset)`` behind the broker's end offsets.

    ``config``: librdkafka settings (a secured cluster's ``security.protocol``, ``sasl.*``,
    ``ssl.*``, …); none of their values is ever part of an error message.
    """
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    settings = {"group.id": "jetspark-inspect", **(config or {}), "enable.auto.commit": False}
    if bootstrap is not None:
        settings["bootstrap.servers"] = bootstrap
    where = settings.get("bootstrap.servers")
    secrets = [str(v) for k, v in (config or {}).items() if k != "bootstrap.servers"]
    try:
        consumer = Consumer(settings)
    except (KafkaException, ValueError, TypeError) as e:
        raise ServiceError(f"Kafka at {where}: the settings were refused: {scrub(str(e), secrets)}") from None
    try:
        out = []
        for topic, partition, offset in offsets:
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                           timeout=timeout_s)
            except KafkaException as e:
                raise ServiceError(f"Kafka at {where}: end offset of {topic}[{partition}]: "
                                   f"{scrub(str(e), secrets)}") from None
            out.append(PartitionLag(topic, partition, offset, low, high))
        return out
    finally:
        consumer.close()


@dataclass(frozen=True)
class QueueState:
    """A RabbitMQ queue: ready messages and consumers (AMQP), unacked (management API, or None)."""

    queue: str
    ready: int
    consumers: int
    unacked: int | None = None


def queue_state(amqp_url: str, queue: str, api_url: str | None = None,
                password: str | None = None) -> QueueState:
    """Ready count and consumers by a passive declare; unacked from the HTTP API when given.

    ``password``: used instead of the URL's (and for an API URL without one).
    """
    import pika
    from pika.exceptions import AMQPError

    secrets = [password] if password else []
    where = redact_dsn(amqp_url)
    url = with_password(amqp_url, password) if password else amqp_url
    if urllib.parse.urlsplit(url).username is not None and urllib.parse.urlsplit(url).password is None:
        raise ServiceError(f"RabbitMQ at {where}: the URL names a user but no password "
                           "(give it by JETSPARK_AMQP_PASSWORD or --amqp-password-file)")
    try:
        conn = pika.BlockingConnection(pika.URLParameters(url))
    except (AMQPError, ValueError) as e:
        raise ServiceError(f"RabbitMQ at {where}: {scrub(redact_dsn(repr(e)), secrets)}") from None
    try:
        ok = conn.channel().queue_declare(queue, passive=True).method
    except AMQPError as e:
        raise ServiceError(f"RabbitMQ at {where}: queue {queue!r}: {scrub(repr(e), secrets)}") from None
    finally:
        if conn.is_open:
            conn.close()
    unacked = None
    if api_url:
        vhost = urllib.parse.urlsplit(amqp_url).path.lstrip("/") or "%2F"
        unacked = int(management_queue(api_url, urllib.parse.unquote(vhost), queue, password=password)
                      .get("messages_unacknowledged", 0))
    return QueueState(queue, ok.message_count, ok.consumer_count, unacked)


def with_password(url: str, password: str) -> str:
    """``url`` (``scheme://[user[:pw]@]host…``) with ``password`` as its password (user ``guest``
    when it names none)."""
    parts = urllib.parse.urlsplit(url)
    user = parts.username or "guest"
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{user}:{urllib.parse.quote(password, safe='')}@{host}"
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def management_queue(api_url: str, vhost: str, queue: str, timeout_s: float = 10.0,
                     password: str | None = None) -> dict:
    """``GET /api/queues/<vhost>/<queue>`` of the management plugin (``http://user:pass@host:15672``;
    without a password in the URL, ``password``, else ``guest``)."""
    parts = urllib.parse.urlsplit(api_url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    quote = urllib.parse.quote
    url = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/")
                                   + f"/api/queues/{quote(vhost, safe='')}/{quote(queue, safe='')}", "", ""))
    request = urllib.request.Request(url)
    user = urllib.parse.unquote(parts.username or "guest")
    secret = urllib.parse.unquote(parts.password) if parts.password else (password or "guest")
    request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode())
    opener = urllib.request.build_opener(SameOriginRedirects(
        f"RabbitMQ management API at {redact_dsn(api_url)}", ServiceError,
        "give that URL itself if it is the API"))
    try:
        with opener.open(request, timeout=timeout_s) as response:  # the user's own URL
            return json.loads(response.read())
    except (OSError, ValueError) as e:
        raise ServiceError(
            f"RabbitMQ management API at {redact_dsn(api_url)}: {scrub(str(e), [secret])}") from None


@dataclass(frozen=True)
class FolderUsage:
    files: int
    bytes: int


@dataclass(frozen=True)
class WalState:
    """The files under a jetrabbitmq ``walLocation``."""

    location: str
    wal: FolderUsage
    wal_messages: int
    """Messages in the WAL files: taken from the queue, not acked yet."""
    wal_ranges: tuple[tuple[int, int, int], ...]
    """``(start, end, epoch)`` of each WAL file."""
    dedup: FolderUsage
    lease: FolderUsage
    holder: dict | None
    """The newest lease file's content (``epoch``, ``host``, ``pid``, ``renewedMs``, ``released``)."""


def _usage(folder: Folder, sub: str, suffix: str = "") -> tuple[FolderUsage, list[str]]:
    sizes = {n: size for n, size in folder.sizes(sub).items() if n.endswith(suffix)}
    return FolderUsage(len(sizes), sum(sizes.values())), sorted(sizes)


def wal_state(location: str) -> WalState:
    """Count and size the WAL, dedup and lease files under ``location`` (a local folder or a
    filesystem URI, as the query's ``walLocation``)."""
    from jetspark.datasources.rabbitmq.dedup import DEDUP_DIR
    from jetspark.datasources.rabbitmq.lease import LEASE_DIR
    from jetspark.datasources.rabbitmq.wal import SUFFIX, WAL_DIR, WalRange

    folder = open_folder(location, "walLocation")
    wal, names = _usage(folder, WAL_DIR, SUFFIX)
    ranges = []
    for n in names:
        try:
            r = WalRange.from_file_name(n)
        except ValueError:
            continue
        ranges.append((r.start, r.end, r.epoch))
    dedup, _ = _usage(folder, DEDUP_DIR)
    lease, lease_names = _usage(folder, LEASE_DIR, ".json")
    holder = None
    for n in reversed(lease_names):
        data = folder.read_bytes(LEASE_DIR, n)
        try:
            holder = json.loads(data) if data is not None else None
        except ValueError:
            continue
        if holder is not None:
            break
    return WalState(folder.shown, wal, sum(e - s for s, e, _ in ranges), tuple(sorted(ranges)), dedup,
                    lease, holder)


@dataclass(frozen=True)
class PreparedTransaction:
    """A jetjdbc prepared transaction waiting for the driver's ``COMMIT PREPARED``."""

    gid: str
    sink_id: str | None
    batch_id: int | None
    partition: int | None
    attempt: int | None
    prepared_ms: int
    age_ms: int
    owner: str
    database: str


def pg_connect(pg_url: str, password: str | None = None):
    """A psycopg connection (autocommit) for inspect, from jetjdbc's ``url`` forms.

    ``password`` overrides the URL's; without either, libpq itself reads ``PGPASSWORD`` or the
    password file (``~/.pgpass``, or ``PGPASSFILE``). Errors name the server, never a password.
    """
    import psycopg

    from jetspark.sinks.jdbc.options import JdbcSinkOptions

    raw = {"url": pg_url, "table": "jetspark_inspect", **({"password": password} if password else {})}
    options = JdbcSinkOptions.parse(raw)
    try:
        return psycopg.connect(options.conninfo, autocommit=True, application_name="jetspark-inspect",
                               **options.connect_kwargs())
    except psycopg.Error as e:
        raise ServiceError(f"PostgreSQL at {options.where}: {options.scrub(str(e))}") from None


def prepared_transactions(pg_url: str, sink_id: str | None = None,
                          password: str | None = None) -> list[PreparedTransaction]:
    """Prepared transactions of jetjdbc sinks (of ``sink_id`` when given) on the server, oldest first.

    ``pg_url``: as jetjdbc's ``url`` option (``postgresql://…``, ``jdbc:postgresql://…``, libpq
    key=value); ``password``: see :func:`pg_connect`. Every database of the server is listed;
    the age is the server's ``now()`` minus ``prepared``.
    """
    import psycopg

    from jetspark.sinks.jdbc.resource import GID_PREFIX, parse_gid

    prefix = f"{GID_PREFIX}:{sink_id}:" if sink_id else f"{GID_PREFIX}:"
    with pg_connect(pg_url, password) as conn:
        try:
            rows = conn.execute(
                "SELECT gid, (extract(epoch FROM prepared) * 1000)::bigint, "
                "(extract(epoch FROM now() - prepared) * 1000)::bigint, owner, database "
                "FROM pg_prepared_xacts WHERE starts_with(gid, %s) ORDER BY prepared, gid",
                (prefix,)).fetchall()
        except psycopg.Error as e:
            raise ServiceError(
                f"PostgreSQL at {redact_dsn(pg_url)}: {scrub(str(e), [password or ''])}") from None
    out = []
    for gid, prepared_ms, age_ms, owner, database in rows:
        key = parse_gid(gid)
        out.append(PreparedTransaction(
            gid, key.sink_id if key else None, key.batch_id if key else None,
            key.partition_id if key else None, key.attempt if key else None,
            int(prepared_ms), int(age_ms), owner, database))
    return out
