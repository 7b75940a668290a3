"""Stage 2 on Spark's keyed state: one state row per key *bucket*, not per key.

Spark's Python state APIs cost a Python call per grouping key per micro-batch (measured
here: ~0.75 ms with ``applyInPandasWithState``, ~1.5 ms with
``transformWithStateInPandas``, whatever the number of rows), so one call per user key
cannot be fast. The grouping key is ``bucket = pmod(xxhash64(key…), buckets)`` instead
and the state of a bucket is the whole partial table of its keys (Arrow IPC bytes, LZ4)
plus the watermark of its last emission; stage 2
(:func:`.combine_to_window.step`) combines many
keys in a few numpy calls. New partials arrive packed too: one row per (stage-1
partition, bucket) holding the Arrow IPC bytes of its partial table (see :mod:`.accumulate_by_frame`),
so Spark does not hand every (key, frame) cell to the function as a pandas row. A bucket
is woken by new partials or by an event-time timer set at the end of its next window to
close; it emits a window when the watermark reaches the window's end (watermark >= end,
as Spark's ``window()`` in append mode). With early results a bucket also emits its open
windows that changed as provisional rows when its period is due (:mod:`.early_results`).

Two adapters with the same semantics. ``applyInPandasWithState`` is the default: its state
travels with the rows (no round trip to a state server per read, write or timer), and on a
live stream (``bench/bench_live.py``, tumbling 1 s, 2 cores, RocksDB with changelog
checkpointing, medians of 3) its first micro-batch took 2–8 s where
``transformWithStateInPandas``'s took 12–16 s (its driver plans the processor in a Python
worker of its own, 2–3 s), so the first windows after a (re)start came twice as soon, at the
same steady micro-batch within the runs' spread. ``transformWithStateInPandas`` stays the
choice with early results, whose query Spark lets run in update output mode with it only.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from jetspark.windowing.combine_to_window import StepResult, empty_output, step
from jetspark.windowing.early_results import EARLY_KEY, is_due
from jetspark.windowing.partials import dump_table, load_table, schema_metadata, unpack_partials
from jetspark.windowing.plan import Plan

if TYPE_CHECKING:
    import pandas as pd

STATE_DDL = "blob binary, emitted bigint"
#: What pandas (2.1+) says when PySpark's ``applyInPandasWithState`` pads its output frames
#: with all-NA rows and concatenates them (``pyspark/worker.py``): a FutureWarning about
#: PySpark's own code, printed to the executor's log every few micro-batches. Silenced for
#: that module only, in the workers that run this module's functions.
PYSPARK_PADDING_WARNING = "The behavior of DataFrame concatenation with empty or all-NA entries"
warnings.filterwarnings("ignore", message=PYSPARK_PADDING_WARNING, category=FutureWarning,
                        module=r"pyspark\.worker$")
#: Key of the blob's schema metadata holding the bucket's registered timer (ms); a blob
#: without it (written before the key existed) makes the processor list the timers instead.
TIMER_KEY = b"jetspark.timer"
def _timer_ms(next_close_us: int | None, watermark_ms: int) -> int | None:
    """The watermark in ms at which the bucket must wake up (ceil, in the future)."""
    if next_close_us is None:
        return None
    return max(-(-next_close_us // 1000), watermark_ms, 1)


class _Core:
    """What both adapters share: decode state, run the step, encode state."""

    def __init__(self, plan: Plan, partial_schema: pa.Schema, key_types: dict) -> None:
        self.plan = plan
        self.partial_schema = partial_schema
        self.key_types = key_types

    def run(
        self, blob: bytes | None, emitted_ms: int | None, partials: pa.Table | None, wm_ms: int,
        now_ms: int | None = None, carried_ms: int | None = None,
    ) -> tuple[StepResult | None, bytes | None, int | None]:
        """One step: (its result, the new state blob or None, the bucket's next timer or None).

        ``carried_ms``: the watermark the new partials' micro-batch reached (see
        :func:`.combine_to_window.step`); the result's ``emitted_us`` is what to store as the
        bucket's last emission.

        The timer is also written into the blob (:data:`TIMER_KEY`), so the next call knows
        which timer the bucket holds without asking Spark for it. ``now_ms``: the processing
        time that early results compare with the bucket's last provisional emission (Spark's
        batch time; the wall clock when None), written into the blob (:data:`EARLY_KEY`)
        when this step emits provisional rows."""
        table = load_table(blob) if blob else None
        meta = (table.schema.metadata or {}) if table is not None else {}
        state = _without_records(table) if table is not None else None
        last_early = int(meta[EARLY_KEY]) if EARLY_KEY in meta else None
        due = False
        if self.plan.early:
            now_ms = int(time.time() * 1000) if now_ms is None or now_ms < 0 else now_ms
            due = is_due(self.plan.early_results_us, last_early, now_ms)
        res = step(
            self.plan,
            state,
            partials,
            None if emitted_ms is None else emitted_ms * 1000,
            wm_ms * 1000,
            early_due=due,
            carried_us=None if carried_ms is None else carried_ms * 1000,
        )
        new_blob = timer = None
        if res is not None and res.state is not None and res.state.num_rows:
            timer = _timer_ms(res.next_close_us, res.emitted_us // 1000)
            records = {} if timer is None else {TIMER_KEY: str(timer).encode()}
            early = now_ms if res.provisional_rows else last_early
            if early is not None:
                records[EARLY_KEY] = str(early).encode()
            new_blob = dump_table(res.state, metadata=records or None)
        return res, new_blob, timer

    def output(self, res: StepResult | None) -> Iterator[pd.DataFrame]:
        out = res.output if res is not None else empty_output(self.plan, self.key_types)
        if out.num_rows:
            yield out.to_pandas()


def _without_records(table: pa.Table) -> pa.Table:
    """The partial table without the bucket's records (timer, last early emission)."""
    meta = table.schema.metadata
    if not meta or not ({TIMER_KEY, EARLY_KEY} & meta.keys()):
        return table
    return table.replace_schema_metadata(
        {k: v for k, v in meta.items() if k not in (TIMER_KEY, EARLY_KEY)} or None)


def stored_timers(blob: bytes | None) -> set[int] | None:
    """The timers a bucket holds, as its state blob records them (:data:`TIMER_KEY`): no state,
    no timer; None when the blob predates the record (then Spark is asked)."""
    if not blob:
        return set()
    meta = schema_metadata(blob)
    if TIMER_KEY not in meta:
        return None
    return {int(meta[TIMER_KEY])}


def _carried_ms(carried_us: int | None, delay_ms: int | None) -> int | None:
    """The watermark the rows' micro-batch reached: the largest watermark-column value they
    carry, less ``withWatermark``'s delay, in whole ms (rounded down); None when ``delay_ms``
    is None (emission at Spark's watermark only)."""
    return None if carried_us is None or delay_ms is None else carried_us // 1000 - delay_ms


def _emitted_ms(res: StepResult | None, wm_ms: int) -> int:
    return wm_ms if res is None or res.emitted_us is None else max(res.emitted_us // 1000, wm_ms)


def _unpacked(state, frames, core: _Core) -> tuple[pa.Table | None, int | None]:
    return (None, None) if state.hasTimedOut else unpack_partials(frames, core.partial_schema)


def pandas_with_state_function(
    plan: Plan, partial_schema: pa.Schema, key_types: dict, delay_ms: int | None = None
):
    """The function for ``groupBy(bucket).applyInPandasWithState(…, EventTimeTimeout)``;
    ``delay_ms``: the delay of the query's one ``withWatermark`` (None: windows are emitted
    at Spark's watermark only, see :func:`.combine_to_window.step`)."""
    core = _Core(plan, partial_schema, key_types)

    def fn(key, frames, state) -> Iterator[pd.DataFrame]:
        partials, carried = _unpacked(state, frames, core)
        blob, emitted = (state.get[0], state.get[1]) if state.exists else (None, None)
        wm = state.getCurrentWatermarkMs()
        res, new_blob, timer = core.run(blob, emitted, partials, wm, state.getCurrentProcessingTimeMs(),
                                        _carried_ms(carried, delay_ms))
        if new_blob is None:
            if state.exists:
                state.remove()
        else:
            state.update((new_blob, _emitted_ms(res, wm)))
            if timer is not None:
                state.setTimeoutTimestamp(timer - 1 if timer - 1 >= max(wm, 1) else timer)
        yield from core.output(res)

    return fn


def stateful_processor(plan: Plan, partial_schema: pa.Schema, key_types: dict, delay_ms: int | None = None):
    """A ``StatefulProcessor`` for ``transformWithStateInPandas`` (timeMode EventTime);
    ``delay_ms`` as for :func:`pandas_with_state_function`."""
    from pyspark.sql.streaming import StatefulProcessor

    core = _Core(plan, partial_schema, key_types)

    class BucketProcessor(StatefulProcessor):
        def init(self, handle) -> None:
            self.handle = handle
            self.value = handle.getValueState("bucket", STATE_DDL)

        def _run(
            self, partials: pa.Table | None, wm: int, now: int, firing: int | None = None,
            carried: int | None = None,
        ) -> Iterator[pd.DataFrame]:
            """One step; afterwards the bucket has exactly one timer (its next close) or none.

            ``firing``: the timer being handled. PySpark deletes it itself once
            ``handleExpiredTimer`` returns, so deleting it here too makes Spark warn that
            the timer does not exist; a timer that is already the next close stays as is.
            """
            got = self.value.get()  # None when the bucket has no state
            blob, emitted = (got[0], got[1]) if got else (None, None)
            registered = stored_timers(blob)
            if registered is None:
                registered = set(self.handle.listTimers())
            res, new_blob, timer = core.run(blob, emitted, partials, wm, now, carried)
            for t in registered - {timer, firing}:
                self.handle.deleteTimer(t)
            if new_blob is None:
                self.value.clear()
            else:
                self.value.update((new_blob, _emitted_ms(res, wm)))
            if timer is not None and timer not in registered:
                self.handle.registerTimer(timer)
            yield from core.output(res)

        def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
            wm = max(timerValues.getCurrentWatermarkInMs(), 0)
            now = timerValues.getCurrentProcessingTimeInMs()  # the batch's time, also with EventTime
            partials, carried = unpack_partials(rows, core.partial_schema)
            yield from self._run(partials, wm, now, carried=_carried_ms(carried, delay_ms))

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[pd.DataFrame]:
            wm = max(timerValues.getCurrentWatermarkInMs(), 0)
            now = timerValues.getCurrentProcessingTimeInMs()
            yield from self._run(None, wm, now, expiredTimerInfo.getExpiryTimeInMs())

        def close(self) -> None:
            pass

    return BucketProcessor()
