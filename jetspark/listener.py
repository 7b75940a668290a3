"""A ``StreamingQueryListener`` that logs one line per micro-batch of jetspark's watermarks.

    from jetspark.listener import WatermarkListener

    spark.streams.addListener(WatermarkListener())        # lines to logger "jetspark.progress"
    spark.streams.addListener(WatermarkListener(print))   # or to any callable

A line::

    batch 7: 2500 rows, 1 late | W 2026-01-01 12:01:35.000 | slowest 1 (45.0 s behind) | idle: 3

``W`` is the sources' coalesced watermark after the batch (jetkafka, jetrabbitmq: from the
source's end offset in the progress); ``slowest`` is the non-idle partition with the least
watermark — the one holding W back — and how far its watermark is behind the leading
partition's; ``idle`` the partitions left out of W. Late records come from observed metrics
named like those of :func:`jetspark.datasources.read_kafka_stream` and
``read_rabbitmq_stream`` (``lateRecords``) or, without them, for jetrabbitmq, from the
running ``counts.late`` of the start and end offsets. Rows are the
observed ``records`` (data rows, without heartbeats) when present, else ``numInputRows``.
Queries without a jetspark source get a line with rows only.

:func:`offsets_behind_latest` reads Spark's Kafka lag metrics (``minOffsetsBehindLatest``, …)
of every source of a progress, jetkafka's included.

The listener runs on Spark's listener bus thread (over Spark Connect: the client's thread
that receives the server's query events), after each batch, asynchronously to the query;
:meth:`WatermarkListener.wait_terminated` waits until a query's last line is out. Progress
is read the same way in both kinds of session (:func:`observed_metrics`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pyspark.sql.streaming.listener import StreamingQueryListener

from jetspark.inspect.checkpoint import (
    JETRABBITMQ,
    PartitionState,
    SourceOffset,
    iso,
    parse_source_offset,
    partitions_of,
    slowest_of,
)

log = logging.getLogger("jetspark.progress")


@dataclass(frozen=True)
class BatchProgress:
    """What one ``StreamingQueryProgress`` says about jetspark's watermarks."""

    query_id: str
    run_id: str
    name: str | None
    batch_id: int
    rows: int
    late: int | None
    watermark: int | None
    """The jetspark sources' coalesced W after the batch (least over sources), epoch ms."""
    spark_watermark_ms: int | None
    """Spark's event-time watermark in effect for the batch, epoch ms."""
    sources: tuple[SourceOffset, ...]
    progress: Mapping
    """The whole progress, as a dict."""

    @property
    def partitions(self) -> dict[str, PartitionState]:
        return partitions_of(self.sources)

    @property
    def slowest(self) -> tuple[str, int] | None:
        """(partition, ms its wm is behind the leading partition's) — see ``slowest_of``."""
        return slowest_of(self.partitions)

    @property
    def idle(self) -> list[str]:
        return [k for k, p in self.partitions.items() if p.idle]


def _epoch_ms(text: str | None) -> int | None:
    if not text:
        return None
    from datetime import datetime

    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def _as_dict(progress) -> Mapping:
    """A progress as a dict: from a ``StreamingQueryProgress``, its JSON text, or a dict."""
    if isinstance(progress, str):
        return json.loads(progress)
    if isinstance(getattr(type(progress), "json", None), property):  # a StreamingQueryProgress
        return json.loads(progress.json)
    return progress


def observed_metrics(progress) -> dict[str, dict[str, object]]:
    """A progress's observed metrics, ``{name: {metric: value}}``, alike in a classic session
    and over Spark Connect.

    ``progress``: a ``StreamingQueryProgress`` (``query.lastProgress``, an element of
    ``query.recentProgress``, a listener event's ``progress``), its ``json`` text or that text
    parsed. A classic session's JSON gives each metric set as ``{metric: value}``; a Connect
    server's as ``{"values": [...], "schema": {...}}``, which PySpark's Connect client leaves
    as a ``Row(values, schema)``, so ``progress["observedMetrics"][name]["records"]`` fails
    there. Both become ``{metric: value}``; a timestamp of the Connect form (epoch ms) becomes
    UTC text ``YYYY-MM-DD HH:MM:SS.fff``.
    """
    progress = _as_dict(progress)
    out: dict[str, dict[str, object]] = {}
    for name, metrics in (progress.get("observedMetrics") or {}).items():
        if hasattr(metrics, "asDict"):  # a Row
            metrics = metrics.asDict(recursive=True)
        if not isinstance(metrics, Mapping):
            continue
        if set(metrics) == {"values", "schema"} and isinstance(metrics["schema"], Mapping):
            fields = metrics["schema"].get("fields") or []
            metrics = {f["name"]: _connect_value(v, f.get("type"))
                       for f, v in zip(fields, metrics["values"], strict=False)}
        out[str(name)] = dict(metrics)
    return out


def _connect_value(value, spark_type) -> object:
    if spark_type == "timestamp" and isinstance(value, int | float):
        return iso(int(value))
    return value


def _late(progress: Mapping, starts: list[SourceOffset], ends: list[SourceOffset]) -> int | None:
    found = [int(m["lateRecords"]) for m in observed_metrics(progress).values()
             if m.get("lateRecords") is not None]
    if found:  # the stream helpers count every source's late records, a queue's too
        return sum(found)
    for start, end in zip(starts, ends, strict=True):
        if end.kind == JETRABBITMQ and "late" in end.counts:
            before = start.counts.get("late", 0) if start.kind == JETRABBITMQ else 0
            found.append(end.counts["late"] - before)
    return sum(found) if found else None


#: Spark's Kafka source metrics (SPARK-34854), in a source's progress ``metrics``.
BEHIND_METRICS = ("minOffsetsBehindLatest", "maxOffsetsBehindLatest", "avgOffsetsBehindLatest")


def offsets_behind_latest(progress) -> list[dict[str, float] | None]:
    """Per source of a progress, how many offsets its batch end is behind the log end:
    ``{"minOffsetsBehindLatest", "maxOffsetsBehindLatest", "avgOffsetsBehindLatest"}`` (None:
    the source does not say). Spark's own Kafka source puts them in the source's ``metrics``;
    a Python data source cannot (PySpark 4.3 has no hook for it), so jetkafka puts them in
    its reported ``latestOffset``, where this finds them. ``progress``: as for
    [`observed_metrics`][jetspark.listener.observed_metrics]."""
    progress = _as_dict(progress)
    out: list[dict[str, float] | None] = []
    for source in progress.get("sources") or []:
        found = {k: float(v) for k, v in (source.get("metrics") or {}).items() if k in BEHIND_METRICS}
        latest = source.get("latestOffset")
        if not found and isinstance(latest, str):  # a progress's JSON has it parsed already
            try:
                latest = json.loads(latest)
            except ValueError:
                latest = None
        if not found and isinstance(latest, Mapping):
            found = {k: float(latest[k]) for k in BEHIND_METRICS if k in latest}
        out.append(found or None)
    return out


def batch_progress(progress: Mapping | str) -> BatchProgress:
    """A [`BatchProgress`][jetspark.listener.BatchProgress] from a progress
    (``json.loads(p.json)``, or the JSON text)."""
    if isinstance(progress, str):
        progress = json.loads(progress)
    sources = progress.get("sources") or []
    ends = [parse_source_offset(i, s.get("endOffset")) for i, s in enumerate(sources)]
    starts = [parse_source_offset(i, s.get("startOffset")) for i, s in enumerate(sources)]
    records = [int(m["records"]) for m in observed_metrics(progress).values()
               if m.get("records") is not None]
    rows = sum(records) if records else int(progress.get("numInputRows") or 0)
    marks = [s.watermark for s in ends if s.kind != "other" and s.watermark is not None]
    return BatchProgress(
        str(progress.get("id")), str(progress.get("runId")), progress.get("name"),
        int(progress["batchId"]), rows, _late(progress, starts, ends), min(marks) if marks else None,
        _epoch_ms((progress.get("eventTime") or {}).get("watermark")), tuple(ends), progress)


def format_line(b: BatchProgress, time: Callable[[int | None], str] = iso) -> str:
    """``batch 7: 2500 rows, 1 late | W … | slowest 1 (45.0 s behind) | idle: 3``."""
    late = "-" if b.late is None else str(b.late)
    line = f"batch {b.batch_id}: {b.rows} rows, {late} late"
    if not any(s.kind != "other" for s in b.sources):
        return line
    slowest = b.slowest
    line += f" | W {time(b.watermark)}"
    line += f" | slowest {slowest[0]} ({slowest[1] / 1000:.1f} s behind)" if slowest else " | slowest -"
    return line + f" | idle: {', '.join(b.idle) or '-'}"


class WatermarkListener(StreamingQueryListener):
    """Logs [`format_line`][jetspark.listener.format_line] (or ``line``) of every batch of every
    query, to ``emit``.

    ``emit``: where lines go (default: ``logging.getLogger("jetspark.progress").info``);
    ``line``: a [`BatchProgress`][jetspark.listener.BatchProgress] → text (None: no line for that
    batch);
    ``on_batch``: also called with each [`BatchProgress`][jetspark.listener.BatchProgress].
    """

    def __init__(self, emit: Callable[[str], None] | None = None, *,
                 line: Callable[[BatchProgress], str | None] = format_line,
                 on_batch: Callable[[BatchProgress], None] | None = None) -> None:
        self.emit = emit or log.info
        self.line = line
        self.on_batch = on_batch
        self._lock = threading.Condition()
        self._terminated: set[str] = set()

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        try:
            b = batch_progress(json.loads(event.progress.json))
            if self.on_batch is not None:
                self.on_batch(b)
            text = self.line(b)
            if text is not None:
                self.emit(text)
        except Exception:  # a listener must never break the bus; say what happened
            log.exception("jetspark.listener: cannot format a query progress")

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        with self._lock:
            self._terminated.add(str(event.runId))
            self._lock.notify_all()

    def wait_terminated(self, run_id: str, timeout_s: float = 60.0) -> bool:
        """Block until this listener saw the run ``run_id`` (``query.runId``) terminate: every
        line of its batches is out then (the bus delivers in order). False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: str(run_id) in self._terminated, timeout_s)
