"""``jetspark inspect`` on checkpoints and write-ahead logs in object storage.

A real jetrabbitmq query keeps its ``walLocation`` on an S3-compatible server that the test
starts (moto's S3 server: an HTTP server speaking the S3 REST API, installed from PyPI; MinIO
is not packaged for pip or apt), and its checkpoint is copied there as Spark's S3A
connector would write it. ``inspect`` then reads both through the library call (keys in the
URI) and the CLI (keys and endpoint from the ``AWS_*`` variables, the checkpoint named
``s3a://`` as in Spark's ``checkpointLocation``), and must report what it reports of the
local copy, without showing the secret key.
"""

from __future__ import annotations

import json

import pyarrow.fs as pafs
import pytest

from jetspark.devtools.cli import main
from jetspark.inspect import inspect

pytestmark = pytest.mark.integration

BUCKET, KEY, SECRET = "checkpoints", "AKIAJETSPARKTEST", "s3cr3t-S3-key-do-not-show"


@pytest.fixture(scope="module")
def s3_endpoint():
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"{host}:{port}"
    bucket_maker = pafs.S3FileSystem(access_key=KEY, secret_key=SECRET, endpoint_override=endpoint,
                                     scheme="http", region="us-east-1", allow_bucket_creation=True)
    bucket_maker.create_dir(BUCKET)
    yield endpoint
    server.stop()


def s3_uri(endpoint: str, path: str, scheme: str = "s3") -> str:
    return (f"{scheme}://{KEY}:{SECRET}@{BUCKET}/{path}"
            f"?endpoint_override={endpoint}&scheme=http&region=us-east-1")


def summary(report) -> list[tuple]:
    return [(b.batch_id, b.committed, b.watermark, b.late,
             [(s.seq, s.epoch, dict(s.counts)) for s in b.sources]) for b in report.checkpoint.batches]


def test_inspect_reads_a_checkpoint_and_a_wal_on_s3(spark, amqp_url, rabbit_queue, tmp_path, s3_endpoint,
                                                    monkeypatch, capsys):
    from jetspark.datasources.rabbitmq.source import RabbitMQDataSource
    from tests.integration.scripts.rabbitmq_common import publish

    spark.dataSource.register(RabbitMQDataSource)
    stamps = [1_700_000_000 + i for i in range(25)]
    stamps[13] = 1_600_000_000  # late: counted in batch 1
    publish(amqp_url, rabbit_queue, [f"m{i}" for i in range(25)], timestamps=stamps)
    wal, cp = s3_uri(s3_endpoint, "orders/wal"), tmp_path / "cp"
    query = (spark.readStream.format("jetrabbitmq").option("url", amqp_url).option("queue", rabbit_queue)
             .option("walLocation", wal).option("maxMessagesPerTrigger", "10").load()
             .writeStream.format("noop").option("checkpointLocation", str(cp))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None
    s3 = pafs.S3FileSystem(access_key=KEY, secret_key=SECRET, endpoint_override=s3_endpoint, scheme="http",
                           region="us-east-1")
    assert s3.get_file_info(pafs.FileSelector(f"{BUCKET}/orders/wal/dedup")), "no dedup file on S3"
    pafs.copy_files(str(cp), f"{BUCKET}/orders/cp", source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=s3)

    local = inspect(str(cp), last=0)
    remote = inspect(s3_uri(s3_endpoint, "orders/cp", "s3a"), last=0, wal_location=wal)
    assert remote.errors == []
    assert summary(remote) == summary(local)
    assert [s.seq for b in remote.checkpoint.batches for s in b.sources] == [10, 20, 25]
    assert [b.late for b in remote.checkpoint.batches] == [0, 1, 0]
    assert (remote.wal.wal.files, remote.wal.wal_messages) == (0, 0)  # every batch was acked
    assert remote.wal.dedup.files >= 1 and remote.wal.holder["epoch"] == 1
    shown = remote.text() + json.dumps(remote.to_json())
    assert SECRET not in shown and f"{BUCKET}/orders/cp" in shown

    # as a user runs it: the keys and the endpoint in the environment, the checkpoint as Spark names it
    for name, value in {"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "us-east-1",
                        "AWS_ENDPOINT_URL": f"http://{s3_endpoint}"}.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    assert main(["inspect", f"s3a://{BUCKET}/orders/cp", "--batches", "0", "--json",
                 "--wal-location", f"s3://{BUCKET}/orders/wal"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [b["batchId"] for b in data["batches"]] == [b.batch_id for b in local.checkpoint.batches]
    assert main(["inspect", f"s3://{BUCKET}/nothing-here"]) == 1
    assert f"s3://{BUCKET}/nothing-here: no such folder" in capsys.readouterr().err
