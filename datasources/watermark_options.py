"""The watermark options both sources take, parsed by one function (docs/design.md, "Watermarks").

- ``watermark.lag`` (``0``): ``wm[p] = max event time of p − lag``;
- ``watermark.idleTimeout`` (``60 seconds``): a partition without new records for this long
  is idle and does not hold W back (0: never idle);
- ``watermark.advanceWhenIdle`` (``false``): with every partition idle, W advances with the
  driver's clock;
- ``watermark.lateRecords`` (``drop``): ``drop``, a late record becomes a counted stub row;
  ``keep``, a normal row with ``late`` true;
- ``watermark.maxFutureSkew`` (none: off): a record whose event time is later than the driver's
  clock plus this follows ``eventTime.onMalformed`` instead of moving W (:mod:`.malformed`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from jetspark.datasources.watermarks import WatermarkPolicy
from jetspark.errors import OptionError
from jetspark.options import Options

LateRecords = Literal["drop", "keep"]
"""``drop``: a late record's payload is blanked and the row is a stub (``heartbeat`` and
``late`` true), counted, then dropped with the heartbeats; ``keep``: a normal row, ``late`` true."""

LAG = "watermark.lag"
IDLE_TIMEOUT = "watermark.idleTimeout"
ADVANCE_WHEN_IDLE = "watermark.advanceWhenIdle"
LATE_RECORDS = "watermark.lateRecords"
MAX_FUTURE_SKEW = "watermark.maxFutureSkew"
OPTIONS = (LAG, IDLE_TIMEOUT, ADVANCE_WHEN_IDLE, LATE_RECORDS, MAX_FUTURE_SKEW)
DEFAULT_IDLE_TIMEOUT_MS = WatermarkPolicy.idle_timeout_ms

_RENAMED = {"lateRecords": LATE_RECORDS}  # jetrabbitmq's former name


@dataclass(frozen=True)
class WatermarkOptions:
    """The parsed ``watermark.*`` options of a source."""

    policy: WatermarkPolicy
    late_records: LateRecords = "drop"
    max_future_skew_ms: int | None = None
    """How far past the driver's clock an event time may be (None: no cut-off)."""

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
        late: LateRecords = opts.choice(LATE_RECORDS, "drop", get_args(LateRecords))  # type: ignore[assignment]
        return cls(
            WatermarkPolicy(
                lag_ms=opts.duration_ms(LAG, 0) or 0,
                idle_timeout_ms=opts.duration_ms(IDLE_TIMEOUT, DEFAULT_IDLE_TIMEOUT_MS) or 0,
                advance_when_idle=advance,
            ),
            late,
            opts.duration_ms(MAX_FUTURE_SKEW, None),
        )
