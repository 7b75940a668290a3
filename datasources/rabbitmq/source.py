"""``spark.readStream.format("jetrabbitmq")``: an acknowledging RabbitMQ queue, exactly once.

Usage::

    stream = (spark.readStream.format("jetrabbitmq")
              .option("url", "amqp://guest:guest@localhost:5672/%2F")
              .option("queue", "orders")
              .option("walLocation", "/checkpoints/orders-wal")   # one per query
              .load()
              .withWatermark("watermark", "0 seconds"))
    # or: read_rabbitmq_stream(spark, url=…, queue="orders", walLocation=…)

The driver takes deliveries (manual acks) into a durable write-ahead log before Spark
logs the offset; executors read batches from the WAL; a batch's deliveries are acked only
after Spark committed it, with their IDs first stored for deduplication of redeliveries.
See docs/design.md, "Queue source protocol", and :mod:`.driver` for the protocol.

Offsets (visible in ``query.lastProgress["sources"][0]["endOffset"]``)::

    {"seq": <next WAL sequence number>, "epoch": <lease epoch of the batch's writer>,
     "watermark": W, "partitions": {"orders": {"0": {"maxTs", "wm", "idle", "progressMs"}}},
     "counts": {"late", "duplicates", "missingIdDropped", "missingIdHashed",
                "malformedEventTime", "malformedHeaders"}}   # running totals

Rows: the message's columns, then ``watermark``, ``heartbeat``, ``late``
(:mod:`jetspark.columns`). With ``watermark.lateRecords=drop`` a late message becomes a stub
row (``heartbeat`` and ``late`` true, ``message_id`` and ``timestamp`` kept, the rest null),
counted, then dropped with the heartbeats (``where(~col("heartbeat"))``; jetspark's windowing
does it); with ``keep`` it is a normal row with ``late`` true — as on jetkafka.

An event time later than the driver's clock plus ``watermark.maxFutureSkew`` (off by
default) follows ``eventTime.onMalformed`` as a malformed one does; the WAL keeps the outcome.

Broker-side caveats: an unacked delivery is returned to the queue when the consumer's
channel dies, and RabbitMQ closes a channel whose delivery stays unacked longer than
``consumer_timeout`` (30 min by default) — keep trigger intervals and batch times well
below it. Quorum queues dead-letter (or drop) a message after ``delivery-limit``
redeliveries (20 by default on RabbitMQ 4): repeated crashes of a query can exceed it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from jetspark import faults
from jetspark.columns import HEARTBEAT, LATE, TIMESTAMP_TYPE, WATERMARK, WATERMARK_DDL, blank
from jetspark.datasources.rabbitmq.options import RabbitMQOptions
from jetspark.datasources.rabbitmq.wal import WalRange, WriteAheadLog
from jetspark.datasources.rabbitmq.watermark import state_of
from jetspark.redaction import mask_userinfo

FORMAT = "jetrabbitmq"
SCHEMA = (
    "message_id string, body binary, routing_key string, exchange string, "
    f"headers map<string,string>, timestamp timestamp, redelivered boolean, {WATERMARK_DDL}"
)
_OUT_COLUMNS = ["message_id", "body", "routing_key", "exchange", "headers", "timestamp", "redelivered"]
_KEPT_IN_STUBS = {"message_id", "timestamp"}


@dataclass(frozen=True)
class WalPartition(InputPartition):
    """One WAL file (or a slice of its record batches) of a batch."""

    wal_location: str = field(repr=False)  # may carry keys
    start: int
    end: int
    epoch: int
    first_batch: int
    last_batch: int
    watermark_ms: int | None
    keep_late: bool


def read_partition(p: WalPartition):
    """Arrow record batches of a partition; late rows are stubs unless kept."""
    wal = WriteAheadLog(p.wal_location)
    wm = pa.scalar(None if p.watermark_ms is None else p.watermark_ms * 1000, TIMESTAMP_TYPE)
    names = [*_OUT_COLUMNS, WATERMARK, HEARTBEAT, LATE]
    for rb in wal.iter_batches(WalRange(p.start, p.end, p.epoch), p.first_batch, p.last_batch):
        if rb.num_rows == 0:
            continue
        late = rb.column(LATE)
        stub = None if p.keep_late or not pc.any(late).as_py() else late
        arrays = [rb.column(c) if c in _KEPT_IN_STUBS else blank(rb.column(c), stub) for c in _OUT_COLUMNS]
        heartbeat = pa.repeat(pa.scalar(False), rb.num_rows) if stub is None else stub
        arrays += [pa.repeat(wm, rb.num_rows), heartbeat, late]
        yield pa.RecordBatch.from_arrays(arrays, names)


class RabbitMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Spark's handle on the queue. Driver state is created on first use and never pickled."""

    def __init__(self, options: RabbitMQOptions) -> None:
        self.options = options
        self._driver = None

    def __getstate__(self) -> dict:
        """What Spark sends to the executors, which only :meth:`read` a partition (the WAL's
        location is in the partition): the broker's credentials stay on the driver, which
        makes its reader from the data source, never from this."""
        url = mask_userinfo(self.options.url)
        return {"options": replace(self.options, url=url, endpoint=None), "_driver": None}

    @property
    def driver(self):
        if self._driver is None:
            from jetspark.datasources.rabbitmq.driver import QueueDriver

            self._driver = QueueDriver(self.options)
        return self._driver

    def initialOffset(self) -> dict:
        return self.driver.initial_offset()

    def getDefaultReadLimit(self):
        n = self.options.max_messages_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def latestOffset(self, start: dict, limit) -> dict:
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return self.driver.latest_offset(start, max_rows)

    def prepareForTriggerAvailableNow(self) -> None:
        self.driver.prepare_available_now()

    def partitions(self, start: dict, end: dict) -> list[WalPartition]:
        faults.point("rabbitmq.before_batch")
        driver = self.driver
        driver.consumer.ensure_open()
        wm = state_of(end, self.options.queue).watermark
        keep = self.options.watermark.keep_late
        out = []
        for r in driver.plan(start, end):
            n = driver.wal.num_record_batches(r)
            for i in range(max(n, 1)):
                out.append(WalPartition(self.options.wal_location, r.start, r.end, r.epoch,
                                        i, i + 1, wm, keep))
        return out

    def read(self, partition: WalPartition):
        return read_partition(partition)

    def commit(self, end: dict) -> None:
        self.driver.commit_through(int(end["seq"]))

    def stop(self) -> None:
        if self._driver is not None:
            self._driver.stop()


class RabbitMQDataSource(DataSource):
    """``format("jetrabbitmq")``; options: see :class:`RabbitMQOptions`."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        RabbitMQOptions.parse(self.options)  # a bad option fails here, before the query starts
        return SCHEMA

    def streamReader(self, schema) -> RabbitMQStreamReader:
        return RabbitMQStreamReader(RabbitMQOptions.parse(self.options))
