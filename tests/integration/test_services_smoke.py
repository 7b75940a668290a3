"""Each real service round-trips data, and Spark runs a Python streaming data source."""

from __future__ import annotations

import uuid

import pika
import psycopg
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from psycopg import sql

pytestmark = pytest.mark.integration


def test_kafka_transactional_produce_and_read_committed_consume(kafka_bootstrap, kafka_topic):
    topic = kafka_topic(partitions=2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap,
                         "transactional.id": f"smoke-{uuid.uuid4().hex}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, f"committed-{i}".encode(), partition=i % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"aborted-{i}".encode(), partition=i % 2)
    producer.flush(30)
    producer.abort_transaction(30)

    def read_all(isolation: str) -> list[bytes]:
        consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": uuid.uuid4().hex,
                             "isolation.level": isolation, "enable.auto.commit": False,
                             "enable.partition.eof": True})
        consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
        values, eof = [], set()
        while len(eof) < 2:
            msg = consumer.poll(30)
            assert msg is not None, "consumer timed out before reaching the end"
            if msg.error():
                eof.add(msg.partition())
                continue
            values.append(msg.value())
        consumer.close()
        return values

    committed = read_all("read_committed")
    assert sorted(committed) == sorted(f"committed-{i}".encode() for i in range(10))
    uncommitted = read_all("read_uncommitted")
    assert len(uncommitted) == 15  # the aborted records are in the log, only filtered out


def test_postgres_prepare_and_commit_prepared(pg_dsn, pg_schema):
    table = sql.Identifier(pg_schema, "smoke")
    gid = f"smoke-{uuid.uuid4().hex}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY)").format(table))
    with psycopg.connect(pg_dsn, autocommit=True) as writer:
        writer.execute("BEGIN")
        writer.execute(sql.SQL("INSERT INTO {} VALUES (1), (2)").format(table))
        writer.execute(sql.SQL("PREPARE TRANSACTION {}").format(sql.Literal(gid)))
    # The preparing session is gone; the prepared transaction survives it.
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        count = sql.SQL("SELECT count(*) FROM {}").format(table)
        assert conn.execute(count).fetchone()[0] == 0
        pending = conn.execute("SELECT gid FROM pg_prepared_xacts WHERE gid = %s", (gid,)).fetchall()
        assert pending == [(gid,)]
        conn.execute(sql.SQL("COMMIT PREPARED {}").format(sql.Literal(gid)))
        assert conn.execute(count).fetchone()[0] == 2
        assert conn.execute("SELECT count(*) FROM pg_prepared_xacts WHERE gid = %s",
                            (gid,)).fetchone()[0] == 0


def test_rabbitmq_publish_and_manual_ack(amqp_url, rabbit_queue):
    conn = pika.BlockingConnection(pika.URLParameters(amqp_url))
    channel = conn.channel()
    channel.confirm_delivery()
    channel.basic_publish("", rabbit_queue, b"payload",
                          pika.BasicProperties(message_id="m-1", delivery_mode=2))
    method, props, body = channel.basic_get(rabbit_queue, auto_ack=False)
    assert (props.message_id, body, method.redelivered) == ("m-1", b"payload", False)
    channel.close()  # no ack: the broker must hand the message out again

    channel = conn.channel()
    method, props, body = channel.basic_get(rabbit_queue, auto_ack=False)
    assert (props.message_id, method.redelivered) == ("m-1", True)
    channel.basic_ack(method.delivery_tag)
    channel.close()
    channel = conn.channel()
    assert channel.queue_declare(rabbit_queue, passive=True).method.message_count == 0
    method, _, _ = channel.basic_get(rabbit_queue, auto_ack=False)
    assert method is None
    conn.close()
