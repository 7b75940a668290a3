"""``jetspark inspect``: the checkpoint and the services' numbers together, as text, JSON or a plot.

    from jetspark.inspect import inspect

    report = inspect("/checkpoints/orders", kafka="broker:9092", pg="postgresql://…")
    print(report.text())
    report.to_json()                 # plain dict
    report.plot("watermarks.png")
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jetspark.errors import JetsparkError
from jetspark.inspect.checkpoint import (
    JETKAFKA,
    BatchInfo,
    Checkpoint,
    committed_kafka_offsets,
    iso,
    read_checkpoint,
    seconds,
    slowest_of,
)
from jetspark.inspect.credentials import Credentials
from jetspark.inspect.services import (
    PartitionLag,
    PreparedTransaction,
    QueueState,
    WalState,
    kafka_lag,
    prepared_transactions,
    queue_state,
    wal_state,
)
from jetspark.redaction import scrub

LATE_NOTE = ("late: jetkafka's late records are not in the checkpoint (its offsets are decided "
             "before the batch is read); each batch's count is in the query's progress, "
             "observedMetrics lateRecords, which WatermarkListener logs")


@dataclass(frozen=True)
class Report:
    """What ``jetspark inspect`` found; service fields are None when not asked for."""

    checkpoint: Checkpoint
    taken_ms: int
    kafka: list[PartitionLag] | None = None
    queue: QueueState | None = None
    wal: WalState | None = None
    sink_id: str | None = None
    prepared: list[PreparedTransaction] | None = None
    errors: list[str] = field(default_factory=list)
    """Services that could not be asked, with the reason (the rest of the report stands)."""
    lag_batch: int | None = None
    """The committed batch whose end offsets the Kafka lags are measured from (None: the
    query's starting offsets, no batch committed yet)."""

    # -- JSON -------------------------------------------------------------------------------
    def to_json(self) -> dict:
        """A plain dict (epoch ms times); ``json.dumps`` it for machines."""
        c = self.checkpoint
        return {
            "checkpoint": c.path, "queryId": c.query_id, "takenMs": self.taken_ms,
            "firstLoggedBatch": c.first_logged, "lastCommittedBatch": c.last_committed,
            "replayBatch": c.replay_batch,
            "batches": [_batch_json(b) for b in c.batches],
            "kafka": None if self.kafka is None else [{**asdict(p), "lag": p.lag} for p in self.kafka],
            "kafkaLagBatch": self.lag_batch,
            "queue": None if self.queue is None else asdict(self.queue),
            "wal": None if self.wal is None else asdict(self.wal),
            "sinkId": self.sink_id,
            "prepared": None if self.prepared is None else [asdict(t) for t in self.prepared],
            "errors": list(self.errors),
        }

    # -- text -------------------------------------------------------------------------------
    def text(self) -> str:
        """The readable report: header, batches, the last batch's partitions, services."""
        c = self.checkpoint
        out = [f"checkpoint {c.path}", f"query id   {c.query_id or '-'}"]
        if not c.batches:
            out.append("no batch in the offset log yet")
        else:
            out.append(f"batches    {c.batches[0].batch_id}..{c.last.batch_id} shown (log from "  # type: ignore[union-attr]
                       f"{c.first_logged}); last committed: "
                       f"{'-' if c.last_committed is None else c.last_committed}")
            out.append(f"replay     batch {c.replay_batch} is planned, not committed: a restart runs it again"
                       if c.replay_batch is not None else "replay     none: every logged batch is committed")
            kinds = sorted({f"{s.index}: {s.kind}" for s in c.last.sources})  # type: ignore[union-attr]
            out.append(f"sources    {', '.join(kinds) or '-'}")
            header = ["batch", "state", "W", "Spark watermark", "late", "slowest (behind)", "idle"]
            rows = [_batch_row(b) for b in c.batches]
            if all(b.late is None for b in c.batches):  # no source of these batches records them
                header.remove("late")
                rows = [r[:4] + r[5:] for r in rows]
            out += ["", *_table(header, rows)]
            if any(s.kind == JETKAFKA for b in c.batches for s in b.sources):
                out.append(LATE_NOTE)
            out += ["", f"partitions after batch {c.last.batch_id}:"]  # type: ignore[union-attr]
            out += _partition_table(c.last, self.kafka, self.taken_ms)  # type: ignore[arg-type]
            if self.kafka is not None:
                after = (f"batch {self.lag_batch}, the last committed" if self.lag_batch is not None
                         else "the query's starting offsets (no batch committed yet)")
                out.append(f"lag: the broker's end offset minus the committed offset, the next offset "
                           f"after {after}")
        if self.queue is not None:
            q = self.queue
            unacked = str(q.unacked) if q.unacked is not None else "- (give the management API URL)"
            out += ["", f"queue {q.queue}: ready {q.ready}, unacked {unacked}, consumers {q.consumers}"]
        if self.wal is not None:
            w = self.wal
            out += ["", f"walLocation {w.location}:",
                    f"  wal    {w.wal.files} files, {_size(w.wal.bytes)}, "
                    f"{w.wal_messages} messages not acked yet",
                    f"  dedup  {w.dedup.files} files, {_size(w.dedup.bytes)}",
                    f"  lease  {w.lease.files} files; " + _holder(w.holder, self.taken_ms)]
        if self.prepared is not None:
            who = f"sink {self.sink_id}" if self.sink_id else "every jetjdbc sink"
            out += ["", f"prepared transactions ({who}): {len(self.prepared)}"]
            if self.prepared:
                out += _table(["gid", "batch", "partition", "attempt", "prepared (UTC)", "age"],
                              [[t.gid, _s(t.batch_id), _s(t.partition), _s(t.attempt), iso(t.prepared_ms),
                                seconds(t.age_ms)] for t in self.prepared])
        for e in self.errors:
            out.append(f"error: {e}")
        return "\n".join(out)

    # -- picture ----------------------------------------------------------------------------
    def plot(self, png: str | Path) -> Path:
        """The per-partition watermarks and W over the shown batches (the demo's picture)."""
        from jetspark.inspect.plot import plot_watermarks

        batches = [_Row(b.batch_id, b.watermark,
                        {k: {"wm": p.wm, "idle": p.idle} for k, p in b.partitions.items()})
                   for b in self.checkpoint.batches]
        marks = [m["wm"] for b in batches for m in b.partitions.values() if m["wm"] is not None]
        t0 = min(marks, default=0)
        return plot_watermarks(Path(png), batches, t0,
                               title=f"watermarks per partition, query {self.checkpoint.query_id} (x: idle)",
                               ylabel=f"event-time watermark, s after {iso(t0)} UTC")


@dataclass(frozen=True)
class _Row:
    batch_id: int
    watermark: int | None
    partitions: dict[str, dict]


def _s(v: object) -> str:
    return "-" if v is None else str(v)


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _holder(h: dict | None, now_ms: int) -> str:
    if not h:
        return "no holder"
    state = "released" if h.get("released") else "held"
    renewed = seconds(now_ms - int(h["renewedMs"])) if h.get("renewedMs") is not None else "-"
    return f"epoch {h.get('epoch')} {state} by {h.get('host')} pid {h.get('pid')}, renewed {renewed} ago"


def _batch_json(b: BatchInfo) -> dict:
    slow = slowest_of(b.partitions)
    return {
        "batchId": b.batch_id, "committed": b.committed, "watermark": b.watermark,
        "sparkWatermarkMs": b.spark_watermark_ms, "timestampMs": b.timestamp_ms, "late": b.late,
        "slowest": None if slow is None else {"partition": slow[0], "behindMs": slow[1]},
        "sources": [{"index": s.index, "kind": s.kind, "watermark": s.watermark, "seq": s.seq,
                     "epoch": s.epoch, "counts": dict(s.counts),
                     "partitions": [asdict(p) for p in s.partitions],
                     **({"raw": s.raw} if s.kind == "other" else {})} for s in b.sources],
    }


def _batch_row(b: BatchInfo) -> list[str]:
    slow = slowest_of(b.partitions)
    idle = [k for k, p in b.partitions.items() if p.idle]
    return [str(b.batch_id), "committed" if b.committed else "PLANNED", iso(b.watermark),
            iso(b.spark_watermark_ms), _s(b.late),
            "-" if slow is None else f"{slow[0]} ({seconds(slow[1])})", ", ".join(idle) or "-"]


def _partition_table(b: BatchInfo, lags: list[PartitionLag] | None, now_ms: int) -> list[str]:
    by_tp = {(p.topic, p.partition): p for p in lags or []}
    rows = []
    for label, p in b.partitions.items():
        lag = by_tp.get((p.topic, p.partition)) if p.topic is not None else None
        advanced = "-" if p.progress_ms is None else f"{seconds(max(0, now_ms - p.progress_ms))} ago"
        rows.append([label, iso(p.max_ts), iso(p.wm), "yes" if p.idle else "no", advanced, _s(p.next_offset),
                     "-" if lag is None else str(lag.offset), "-" if lag is None else str(lag.end),
                     "-" if lag is None else str(lag.lag)])
    header = ["partition", "maxTs", "wm", "idle", "last advanced", "next offset", "committed", "end offset",
              "lag"]
    return _table(header, rows)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]


def inspect(checkpoint: str, *, last: int | None = 20, kafka: str | None = None, pg: str | None = None,
            sink_id: str | None = None, amqp: str | None = None, queue: str | None = None,
            rabbitmq_api: str | None = None, wal_location: str | None = None,
            credentials: Credentials | None = None, timeout_s: float = 10.0,
            clock: Callable[[], int] = lambda: time.time_ns() // 1_000_000) -> Report:
    """Read ``checkpoint`` (the newest ``last`` batches; None or 0: all) and ask the given services.

    ``kafka``: bootstrap servers — lag of each jetkafka partition behind the broker's end
    offset; ``pg`` (+ ``sink_id``, default the query id): the jetjdbc sink's prepared
    transactions; ``amqp`` + ``queue`` (+ ``rabbitmq_api``, the management plugin's URL):
    the queue's counts; ``wal_location``: jetrabbitmq's WAL, dedup and lease files;
    ``credentials``: passwords and Kafka settings (``jetspark.inspect.credentials``; a
    ``bootstrap.servers`` there stands for ``kafka``). A service that cannot be asked is named
    in ``Report.errors``, which never show a credential; ``timeout_s`` bounds each Kafka request.
    """
    cp = read_checkpoint(checkpoint, last)
    creds = credentials or Credentials()
    errors: list[str] = []

    def ask(what: str, call: Callable[[], object]) -> object:
        try:
            return call()
        except JetsparkError as e:
            errors.append(f"{what}: {scrub(str(e), creds.secrets())}")
            return None

    if kafka is None:
        kafka = creds.kafka_config.get("bootstrap.servers")

    lags, basis = None, None
    if kafka is not None:
        basis, tps = committed_kafka_offsets(cp)
        lags = ask("kafka", lambda: kafka_lag(kafka, tps, timeout_s=timeout_s,
                                              config=creds.kafka_config))  # type: ignore[arg-type]
    q = None
    if amqp is not None:
        if queue is None:
            errors.append("rabbitmq: give the queue name too")
        else:
            q = ask("rabbitmq", lambda: queue_state(amqp, queue, rabbitmq_api, creds.amqp_password))
    wal = ask("walLocation", lambda: wal_state(wal_location)) if wal_location is not None else None
    sid = sink_id or cp.query_id
    prepared = (ask("postgresql", lambda: prepared_transactions(pg, sid, creds.pg_password))
                if pg is not None else None)
    return Report(cp, clock(), lags, q, wal, sid if pg is not None else None, prepared,  # type: ignore[arg-type]
                  errors, lag_batch=basis)
