"""The watermark options both sources take, parsed by one function (docs/design.md, "Watermarks").

- ``watermark.lag`` (``0``): ``wm[p] = max event time of p − lag``;
- ``watermark.idleTimeout`` (``60 seconds``): a partition without new records for this long
  is idle and does not hold W back (0: never idle);
- ``watermark.advanceWhenIdle`` (``false``): with every partition idle, W advances with the
  driver's clock;
- ``watermark.lateRecords`` (``keep``): ``keep``, a late record is a normal row with ``late``
  true (a window stage then leaves it out of the windows it has already emitted, and only those);
  ``drop``, a late record becomes a counted stub row without payload;
- ``watermark.heartbeats`` (true when the query asks for event-time semantics — another
  ``watermark.*`` option is set, or the stream comes from ``read_kafka_stream`` /
  ``read_rabbitmq_stream`` — else false): a batch whose W moved without any record carries it
  in one payload-less row (``heartbeat`` true). Off, a plain read has exactly the rows of
  Spark's own Kafka source;
- ``watermark.maxFutureSkew`` (none: off): a record whose event time is later than the driver's
  clock plus this follows ``eventTime.onMalformed`` instead of moving W (:mod:`.malformed`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from jetspark.datasources.watermarks import WatermarkPolicy
from jetspark.errors import OptionError
from jetspark.options import Options

LateRecords = Literal["keep", "drop"]
"""``keep`` (default): a normal row, ``late`` true; ``drop``: a late record's payload is blanked
and the row is a stub (``heartbeat`` and ``late`` true), counted, then dropped with the heartbeats."""

LAG = "watermark.lag"
IDLE_TIMEOUT = "watermark.idleTimeout"
ADVANCE_WHEN_IDLE = "watermark.advanceWhenIdle"
LATE_RECORDS = "watermark.lateRecords"
MAX_FUTURE_SKEW = "watermark.maxFutureSkew"
HEARTBEATS = "watermark.heartbeats"
OPTIONS = (LAG, IDLE_TIMEOUT, ADVANCE_WHEN_IDLE, LATE_RECORDS, MAX_FUTURE_SKEW, HEARTBEATS)
DEFAULT_IDLE_TIMEOUT_MS = WatermarkPolicy.idle_timeout_ms

_RENAMED = {"lateRecords": LATE_RECORDS}  # jetrabbitmq's former name


@dataclass(frozen=True)
class WatermarkOptions:
    """The parsed ``watermark.*`` options of a source."""

    policy: WatermarkPolicy
    late_records: LateRecords = "keep"
    max_future_skew_ms: int | None = None
    """How far past the driver's clock an event time may be (None: no cut-off)."""
    heartbeats: bool = False
    """Payload-less rows carry a W that moved without records (``watermark.heartbeats``)."""

    @property
    def keep_late(self) -> bool:
        return self.late_records == "keep"

    @classmethod
    def parse(cls, opts: Options, *, can_advance_when_idle: str | None = None) -> WatermarkOptions:
        """The options of ``opts``; ``can_advance_when_idle``: None when the source honours
        ``watermark.advanceWhenIdle=true``, else why it cannot (the option is then refused)."""
        for old, new in _RENAMED.items():
            if opts.get(old) is not None:
                raise OptionError(old, opts.get(old), f"option {new!r} (the watermark options are "
                                  f"{', '.join(OPTIONS)} on every jetspark source)")
        advance = opts.boolean(ADVANCE_WHEN_IDLE, False)
        if advance and can_advance_when_idle is not None:
            raise OptionError(ADVANCE_WHEN_IDLE, opts.get(ADVANCE_WHEN_IDLE),
                              f"false ({can_advance_when_idle})")
        late: LateRecords = opts.choice(LATE_RECORDS, "keep", get_args(LateRecords))  # type: ignore[assignment]
        # any watermark.* option (a source's own too, e.g. jetkafka's watermark.maxTimestampFrom)
        asked = any(name.lower() != "heartbeats" for name in opts.with_prefix("watermark."))
        return cls(
            WatermarkPolicy(
                lag_ms=opts.duration_ms(LAG, 0) or 0,
                idle_timeout_ms=opts.duration_ms(IDLE_TIMEOUT, DEFAULT_IDLE_TIMEOUT_MS) or 0,
                advance_when_idle=advance,
            ),
            late,
            opts.duration_ms(MAX_FUTURE_SKEW, None),
            opts.boolean(HEARTBEATS, asked),
        )


def asks_for_event_time(opts: Options) -> bool:
    """The query asks for event-time semantics: any ``watermark.*`` or ``eventTime.*`` option
    (:func:`jetspark.datasources.read_kafka_stream` sets ``watermark.heartbeats``). Only then
    do jetkafka's rows carry ``watermark``, ``heartbeat`` and ``late``: a plain read has exactly
    the columns of Spark's own Kafka source."""
    return bool(opts.with_prefix("watermark.") or opts.with_prefix("eventTime."))
