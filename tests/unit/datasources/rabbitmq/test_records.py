"""Event times of deliveries: absent, valid and malformed ones (pure logic, no broker)."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest

from jetspark.datasources.rabbitmq.amqp import Properties
from jetspark.datasources.rabbitmq.consumer import Delivery
from jetspark.datasources.rabbitmq.options import RabbitMQOptions
from jetspark.datasources.rabbitmq.records import MAX_TIMESTAMP_S, event_times_ms, to_wal_table

RECEIVED = 777


def _options(**extra: str) -> RabbitMQOptions:
    return RabbitMQOptions.parse({"url": "amqp://localhost", "queue": "q", "walLocation": "/tmp/w", **extra})


def _delivery(timestamp: int | None = None, headers: dict | None = None, malformed: bool = False) -> Delivery:
    return Delivery(1, 1, b"", Properties("m", timestamp, headers, malformed), "rk", "", False)


def test_timestamps_beyond_year_9999_or_int64_are_malformed_and_null():
    stamps = [5, None, MAX_TIMESTAMP_S, MAX_TIMESTAMP_S + 1, 2**63 // 1000 + 1, 2**64 - 1]
    rows = [_delivery(s) for s in stamps]
    times = event_times_ms(rows, _options(), RECEIVED)
    assert times.ms.tolist() == [5000, RECEIVED, MAX_TIMESTAMP_S * 1000, RECEIVED, RECEIVED, RECEIVED]
    assert times.malformed.tolist() == [False, False, False, True, True, True]
    table = to_wal_table(rows, list("abcdef"), times.ms, np.zeros(6, bool))
    assert [None if t is None else t.year for t in table.column("timestamp").to_pylist()] == [
        1970, None, 9999, None, None, None]


@pytest.mark.parametrize(("values", "ms", "malformed"), [
    ([1, None, 2.5, True], [1, RECEIVED, 2, RECEIVED], [False, False, False, False]),
    ([math.nan, math.inf, -math.inf, 1e300, 4.0], [RECEIVED] * 4 + [4], [True] * 4 + [False]),
    ([dt.datetime(2020, 1, 1, tzinfo=dt.UTC), dt.datetime(2020, 1, 1)], [1577836800000] * 2, [False] * 2),
    (["2020-01-01T00:00:00Z", "soon", b"\xff", 5, {"a": 1}, [1]],
     [1577836800000, RECEIVED, RECEIVED, 5, RECEIVED, RECEIVED], [False, True, True, False, True, True]),
    ([2**53 + 1, -2**63, 7], [RECEIVED, RECEIVED, 7], [True, True, False]),  # int64, beyond float64's 2**53
    ([2**64 - 1, 2**63, 7], [RECEIVED, RECEIVED, 7], [True, True, False]),  # uint64
    ([2**64 - 1, -2**63, 7], [RECEIVED, RECEIVED, 7], [True, True, False]),  # neither: value by value
])
def test_header_event_times(values, ms, malformed):
    times = event_times_ms([_delivery(headers={"ts": v}) for v in values], _options(eventTime="header:ts"),
                           RECEIVED)
    assert times.ms.tolist() == ms and times.malformed.tolist() == malformed


def test_undecoded_headers_make_a_header_event_time_malformed():
    rows = [_delivery(headers=None, malformed=True), _delivery(headers={"ts": 3})]
    times = event_times_ms(rows, _options(eventTime="header:ts"), RECEIVED)
    assert times.ms.tolist() == [RECEIVED, 3] and times.malformed.tolist() == [True, False]
    assert event_times_ms(rows[:1], _options(), RECEIVED).malformed.tolist() == [False]


@pytest.mark.parametrize("header", [False, True], ids=["timestamp", "header"])
def test_event_times_beyond_the_cut_off_are_malformed_and_the_receive_time_stands_in(header):
    """watermark.maxFutureSkew: the property (seconds) or header (ms) later than the cut-off."""
    stamps_s = [5, 20, 10, None]  # cut-off 10 s: the second is beyond it, the third exactly at it
    if header:
        rows = [_delivery(headers=None if s is None else {"ts": s * 1000}) for s in stamps_s]
        options = _options(eventTime="header:ts")
    else:
        rows = [_delivery(s) for s in stamps_s]
        options = _options()
    times = event_times_ms(rows, options, RECEIVED, cutoff_ms=10_000)
    assert times.ms.tolist() == [5_000, RECEIVED, 10_000, RECEIVED]
    assert times.malformed.tolist() == times.future.tolist() == [False, True, False, False]
    assert event_times_ms(rows, options, RECEIVED).future.tolist() == [False] * 4  # no cut-off


def test_the_wal_nulls_a_timestamp_beyond_the_cut_off_when_asked():
    rows = [_delivery(5), _delivery(20)]
    table = to_wal_table(rows, ["a", "b"], np.array([5_000, RECEIVED]), np.zeros(2, bool),
                         null_timestamp=np.array([False, True]))
    assert [t is None for t in table.column("timestamp").to_pylist()] == [False, True]


def test_distinct_binary_header_ids_stay_distinct():
    # b"\xff\x01" and b"\xfe\x01" both decoded to U+FFFD + \x01: dedup dropped the second
    from jetspark.datasources.rabbitmq.records import message_ids

    raw = [b"\xff\x01", b"\xfe\x01", b"\x80", b"\x81", b"plain"]
    deliveries = [_delivery(headers={"id": v}) for v in raw]
    ids = message_ids(deliveries, _options(messageId="header:id"))
    assert len(set(ids)) == len(raw) and ids[-1] == "plain"
