"""Helpers for jetrabbitmq tests and query scripts: publishing, queue counts, PG sink."""

from __future__ import annotations

import os
import struct
import subprocess
import time

import pika
import pika.data

CTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"  # not /usr/sbin's wrapper: it resets HOME (the cookie)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


_pika_encode_value = pika.data.encode_value


def _encode_value(pieces: list, value: object) -> int:
    """pika's header encoding, plus floats as AMQP doubles (``d``), which pika refuses: other
    clients send them, NaN and infinities included."""
    if isinstance(value, float):
        pieces.append(struct.pack(">cd", b"d", value))
        return 9
    return _pika_encode_value(pieces, value)


pika.data.encode_value = _encode_value


def publish(url: str, queue: str, ids: list[str | None], *, bodies: list[bytes] | None = None,
            timestamps: list[int | None] | None = None, headers: list[dict | None] | None = None) -> None:
    """Publish persistent messages with publisher confirms (each one is on the broker)."""
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        for i, mid in enumerate(ids):
            body = bodies[i] if bodies else f"body-{mid}".encode()
            props = pika.BasicProperties(
                message_id=mid, delivery_mode=2,
                timestamp=timestamps[i] if timestamps else None,
                headers=headers[i] if headers else None,
            )
            ch.basic_publish("", queue, body, props, mandatory=True)
    finally:
        conn.close()


def ready_count(url: str, queue: str) -> int:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        return conn.channel().queue_declare(queue, passive=True).method.message_count
    finally:
        conn.close()


def wait_no_consumer(url: str, queue: str, timeout_s: float = 30) -> int:
    """Poll until ``queue`` has no consumer: a stopped query's source closes its connection
    after the query has terminated (Spark's runner calls stop() once it sees the end)."""
    deadline = time.monotonic() + timeout_s
    while True:
        conn = pika.BlockingConnection(pika.URLParameters(url))
        try:
            consumers = conn.channel().queue_declare(queue, passive=True).method.consumer_count
        finally:
            conn.close()
        if consumers == 0 or time.monotonic() > deadline:
            return consumers
        time.sleep(0.1)


def queue_counts(queue: str) -> tuple[int, int]:
    """(ready, unacked) of ``queue`` on the local jetspark RabbitMQ node, via rabbitmqctl."""
    from jetspark.devtools.services import local

    rec = local.status()["rabbitmq"]
    env = dict(os.environ, HOME=rec.data_dir, ERL_EPMD_PORT=str(rec.ports["epmd"]))
    node = f"jetspark{rec.ports['amqp']}@localhost"
    out = subprocess.run(
        [CTL if os.access(CTL, os.X_OK) else "rabbitmqctl", "-q", "-n", node, "list_queues",
         "--no-table-headers", "name", "messages_ready", "messages_unacknowledged"],
        env=env, capture_output=True, text=True, check=True, timeout=60,
    ).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == queue:
            return int(parts[1]), int(parts[2])
    raise AssertionError(f"queue {queue} not listed:\n{out}")


def wait_counts(queue: str, expected: tuple[int, int], timeout_s: float = 30) -> tuple[int, int]:
    """Poll the broker until the queue shows ``expected`` (acks are asynchronous)."""
    deadline = time.monotonic() + timeout_s
    counts = queue_counts(queue)
    while counts != expected and time.monotonic() < deadline:
        time.sleep(0.2)
        counts = queue_counts(queue)
    return counts


def pg_sink_table(dsn: str, schema: str) -> str:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f'CREATE TABLE IF NOT EXISTS "{schema}".received '
            "(batch_id bigint NOT NULL, message_id text NOT NULL, body bytea, redelivered boolean)"
        )
    return f'"{schema}".received'


def pg_batch_writer(dsn: str, table: str):
    """A foreachBatch function writing a batch idempotently: the batch's rows are replaced."""

    def write(df, batch_id: int) -> None:
        import psycopg

        rows = [(batch_id, r.message_id, r.body, r.redelivered)
                for r in df.select("message_id", "body", "redelivered").collect()]
        with psycopg.connect(dsn) as conn, conn.transaction():
            conn.execute(f"DELETE FROM {table} WHERE batch_id = %s", (batch_id,))
            with conn.cursor() as cur:
                cur.executemany(f"INSERT INTO {table} VALUES (%s, %s, %s, %s)", rows)

    return write


def pg_received(dsn: str, schema: str) -> list[str]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute(f'SELECT message_id FROM "{schema}".received').fetchall()]
