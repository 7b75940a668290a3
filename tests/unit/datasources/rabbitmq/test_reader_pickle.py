"""What Spark pickles to the executors for jetrabbitmq (the stream reader, for ``read``) holds no
broker credential: executors read the WAL only, whose location the partition carries."""

from __future__ import annotations

import pickle

import pyarrow as pa

from jetspark.datasources.rabbitmq.options import RabbitMQOptions
from jetspark.datasources.rabbitmq.source import RabbitMQStreamReader, WalPartition
from jetspark.datasources.rabbitmq.wal import WAL_SCHEMA, WalRange, WriteAheadLog

CANARY = "c4n4ry-Secret-7"


def test_the_pickled_reader_holds_no_credential_and_still_reads(tmp_path, monkeypatch):
    secret = tmp_path / "secrets" / "amqp"
    secret.parent.mkdir()
    secret.write_text(CANARY + "-file")
    monkeypatch.setenv("JETSPARK_SECRET_DIRS", str(secret.parent))
    for raw in ({"url": f"amqp://app:{CANARY}@mq.example.com:5672/%2F"},
                {"url": "amqp://mq.example.com:5672/%2F", "user": "app", "password": CANARY},
                {"url": "amqp://mq.example.com:5672/%2F", "user": "app", "password.file": str(secret)}):
        options = RabbitMQOptions.parse({**raw, "queue": "orders", "walLocation": str(tmp_path / "wal")})
        data = pickle.dumps(RabbitMQStreamReader(options))
        assert CANARY.encode() not in data, raw
    rows = pa.Table.from_pylist([{"message_id": "m1", "body": b"x", "redelivered": False, "late": False}],
                                schema=WAL_SCHEMA)
    WriteAheadLog(str(tmp_path / "wal")).write(WalRange(0, 1, 1), rows)
    executor_side = pickle.loads(data)
    got = list(executor_side.read(WalPartition(str(tmp_path / "wal"), 0, 1, 1, 0, 1, None, False)))
    assert got[0].column("message_id").to_pylist() == ["m1"]
