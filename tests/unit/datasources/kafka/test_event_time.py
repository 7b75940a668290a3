"""Event time from a JSON field of the value: vectorized path, record-by-record path, policies,
and every ISO-8601 form README.md lists (its ``<!-- iso8601-forms -->`` table)."""

from __future__ import annotations

import datetime as dt
import json
import re

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jetspark.datasources.kafka import event_time as kafka_event_time
from jetspark.datasources.kafka.event_time import (
    EventTimeSpec,
    MalformedEventTimeError,
    event_times,
    extract_ms,
    extract_us,
    iso8601_to_us,
    watermark_times,
)
from jetspark.errors import OptionError
from jetspark.options import Options
from tests import readme


def iso8601_forms() -> list[tuple[str, int | None]]:
    """README's ISO-8601 table: (field value, epoch µs or None for malformed), one per value.

    A value cell holds backticked values (``(empty)`` is the empty string); the other cell a
    backticked UTC time ``YYYY-MM-DD HH:MM:SS[.f]`` or ``malformed``.
    """
    lines = readme.README.read_text().splitlines()
    at = lines.index("<!-- iso8601-forms -->")
    assert lines[at + 2].startswith("| ---"), "the marker must precede the table's header"
    forms = []
    for line in lines[at + 3:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 2, line
        values = re.findall(r"`([^`]*)`", cells[0]) + ([""] if "(empty)" in cells[0] else [])
        if cells[1] == "malformed":
            expected = None
        else:
            utc = dt.datetime.fromisoformat(re.fullmatch(r"`([^`]+)`", cells[1]).group(1))
            utc = utc.replace(tzinfo=dt.UTC)
            expected = (utc - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
        forms += [(v, expected) for v in values]
    return forms


ISO_FORMS = iso8601_forms()
IMPOSSIBLE = {"2026-02-30T00:00:05", "2026-01-01T24:00:00Z", "2026-01-01T00:00:60Z",
              "2026-01-01T00:00:05+25:00"}
"""Forms the regular expression lets through but Arrow's cast rejects: the chunk goes record by record."""


def spec(**raw: str) -> EventTimeSpec | None:
    return EventTimeSpec.parse(Options({f"eventTime.{k}": v for k, v in raw.items()}))


def values(*objs) -> pa.Array:
    return pa.array([o if o is None or isinstance(o, bytes) else json.dumps(o).encode() for o in objs],
                    pa.binary())


def test_options_parse_and_name_bad_values():
    assert spec() is None
    s = spec(field="meta.ts", format="ISO8601", onMalformed="null")
    assert s == EventTimeSpec(("meta", "ts"), "iso8601", "null")
    with pytest.raises(OptionError, match=r"eventTime.format.*'hours'.*epochMillis"):
        spec(field="ts", format="hours")
    with pytest.raises(OptionError, match=r"eventTime.field.*'a..b'"):
        spec(field="a..b")
    with pytest.raises(OptionError, match=r"eventTime.onMalformed.*unless eventTime.field"):
        spec(onMalformed="null")


def test_formats_and_nested_paths():
    ms = extract_ms(spec(field="ts"), values({"ts": 1_700_000_000_123}, {"ts": 5.9, "x": [1, {"y": 2}]}))
    assert ms.to_pylist() == [1_700_000_000_123, 5]
    secs = extract_ms(spec(field="a.b", format="epochSeconds"), values({"a": {"b": 1.5}}, {"a": {"b": 2}}))
    assert secs.to_pylist() == [1500, 2000]
    iso = extract_ms(spec(field="t", format="iso8601"),
                     values({"t": "2024-01-01T00:00:00.250Z"}, {"t": "2024-01-01T02:00:00+02:00"},
                            {"t": "1969-12-31T23:59:59.9995"}))
    assert iso.to_pylist() == [1_704_067_200_250, 1_704_067_200_000, -1]  # ms floored, also before 1970


def test_the_readme_lists_every_kind_of_form():
    expected = dict(ISO_FORMS)
    assert len(expected) == len(ISO_FORMS), "a value listed twice"
    malformed = {v for v, e in ISO_FORMS if e is None}
    assert len(malformed) >= 10 and len(expected) - len(malformed) >= 10
    assert malformed >= IMPOSSIBLE


@pytest.mark.parametrize(("text", "expected_us"), ISO_FORMS, ids=[repr(v) for v, _ in ISO_FORMS])
def test_iso8601_form_of_the_readme(text, expected_us):
    """Each form alone (the vectorized path, or record by record for an impossible date)."""
    s = spec(field="meta.t", format="iso8601", onMalformed="null")
    assert extract_us(s, values({"meta": {"t": text}})).to_pylist() == [expected_us]


def test_iso8601_forms_of_the_readme_in_one_chunk_and_vectorized():
    """All forms in one chunk give the same; without the impossible dates Arrow parses the
    whole chunk at once, and only those make a chunk go record by record."""
    s = spec(field="t", format="iso8601", onMalformed="null")
    chunk = values(*[{"t": v} for v, _ in ISO_FORMS])
    assert extract_us(s, chunk).to_pylist() == [e for _, e in ISO_FORMS]
    vectorizable = [(v, e) for v, e in ISO_FORMS if v not in IMPOSSIBLE]
    assert kafka_event_time._vectorized(s, values(*[{"t": v} for v, _ in vectorizable])).to_pylist() == \
        [e for _, e in vectorizable]
    for text in IMPOSSIBLE:
        with pytest.raises(pa.ArrowInvalid):
            iso8601_to_us(pa.array([text]))


def test_iso8601_event_times_keep_microseconds_and_watermarks_floor_to_ms():
    raw = values({"t": "2026-01-01T00:00:05.123456789Z"}, {"t": "2026-01-01"}, {"t": "2026-01-01T00:00:06"})
    column, for_wm = event_times(spec(field="t", format="iso8601", onMalformed="null"), raw,
                                 np.array([1, 2, 3], np.int64), topic="t", partition=0, offsets=np.arange(3))
    t0 = 1_767_225_600_000
    assert [None if v is None else v.value for v in column] == \
        [(t0 + 5_123) * 1000 + 456, None, (t0 + 6_000) * 1000]
    assert for_wm.tolist() == [t0 + 5_123, 2, t0 + 6_000]


_SIGN_HH = st.tuples(st.sampled_from("+-"), st.integers(0, 23))
_ZONES = st.one_of(
    st.just(""), st.just("Z"),
    st.tuples(_SIGN_HH, st.integers(0, 59), st.sampled_from([":", ""])).map(
        lambda z: f"{z[0][0]}{z[0][1]:02}{z[2]}{z[1]:02}"),
    _SIGN_HH.map(lambda z: f"{z[0]}{z[1]:02}"),
)


@given(st.datetimes(dt.datetime(1900, 1, 2), dt.datetime(9999, 12, 30)), st.integers(0, 9), _ZONES,
       st.sampled_from("T "))
def test_iso8601_equals_pythons_datetime(when, digits, zone, sep):
    """Any valid time in any accepted form: Python's datetime (microseconds, digits beyond cut)."""
    fraction = f"{when.microsecond:06}999"[:digits]
    text = when.strftime(f"%Y-%m-%d{sep}%H:%M:%S") + (f".{fraction}" if digits else "") + zone
    offset = dt.timedelta(0) if zone in ("", "Z") else (-1 if zone[0] == "-" else 1) * dt.timedelta(
        hours=int(zone[1:3]), minutes=int(zone.replace(":", "")[3:5] or 0))
    exact = when.replace(microsecond=int((fraction + "000000")[:6]), tzinfo=dt.timezone(offset))
    expected = (exact - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
    assert iso8601_to_us(pa.array([text])).to_pylist() == [expected], text


def test_missing_null_and_malformed_values_are_null_and_the_others_kept():
    raw = values({"ts": 10}, None, b"", b"not json", b"[1, 2]", {"ts": "12"}, {"other": 1},
                 {"ts": True}, b'{"ts":\n 20}', {"ts": 30})
    assert extract_ms(spec(field="ts"), raw).to_pylist() == [10, None, None, None, None, None, None, None,
                                                              20, 30]


def test_event_times_policy_fail_names_the_record_and_null_falls_back_to_kafka_time():
    raw = values({"ts": 10}, {"nope": 1}, {"ts": 30})
    kafka_ts = np.array([100, 200, 300], np.int64)
    offsets = np.array([7, 8, 9], np.int64)
    with pytest.raises(MalformedEventTimeError, match=r"offset 8 of topic 't' partition 2.*'ts'"):
        event_times(spec(field="ts"), raw, kafka_ts, topic="t", partition=2, offsets=offsets)
    column, for_wm = event_times(spec(field="ts", onMalformed="null"), raw, kafka_ts, topic="t",
                                 partition=2, offsets=offsets)
    assert column.type == pa.timestamp("us", tz="UTC")
    assert [None if v is None else v.value for v in column] == [10_000, None, 30_000]
    assert for_wm.tolist() == [10, 200, 30]


@given(st.lists(st.one_of(
    st.integers(0, 2**45),
    st.none(),
    st.text(max_size=5),
    st.dictionaries(st.sampled_from(["ts", "x"]), st.one_of(st.integers(0, 2**45), st.text(max_size=3)),
                    max_size=2),
), max_size=30))
def test_vectorized_path_equals_record_by_record_reference(objs):
    raw = values(*[{"ts": o} if isinstance(o, int) else o if isinstance(o, dict) else
                   (None if o is None else o.encode()) for o in objs])
    expected = []
    for v in raw.to_pylist():
        try:
            node = json.loads(v) if v else None
        except ValueError:
            node = None
        ts = node.get("ts") if isinstance(node, dict) else None
        expected.append(ts if isinstance(ts, int) and not isinstance(ts, bool) else None)
    assert extract_ms(spec(field="ts"), raw).to_pylist() == expected


def test_deeply_nested_values_are_malformed_not_a_recursion_error():
    deep = b'{"ts": ' + b'{"a": ' * 5000 + b"1" + b"}" * 5000 + b"}"
    raw = values({"ts": 10}, deep, b'{"ts": ' + b"[" * 5000 + b"]" * 5000 + b"}", {"ts": 30})
    assert extract_ms(spec(field="ts"), raw).to_pylist() == [10, None, None, 30]
    _column, for_wm = event_times(spec(field="ts", onMalformed="null"), raw, np.array([1, 2, 3, 4]),
                                  topic="t", partition=0, offsets=np.arange(4))
    assert for_wm.tolist() == [10, 2, 3, 30]


def test_an_event_time_beyond_the_cut_off_is_malformed():
    """watermark.maxFutureSkew: a field later than the batch's cut-off fails or is nulled, and
    under null the Kafka timestamp stands in unless it is beyond the cut-off too."""
    raw = values({"ts": 10}, {"ts": 5_000}, {"ts": 30}, {"ts": 6_000})
    kafka_ts = np.array([100, 200, 300, 9_000], np.int64)
    offsets = np.array([7, 8, 9, 10], np.int64)
    beyond = r"offset 8 of topic 't' partition 2.*'ts'.*cut-off 1000.*watermark\.maxFutureSkew"
    with pytest.raises(MalformedEventTimeError, match=beyond):
        event_times(spec(field="ts"), raw, kafka_ts, topic="t", partition=2, offsets=offsets, cutoff_ms=1_000)
    column, for_wm = event_times(spec(field="ts", onMalformed="null"), raw, kafka_ts, topic="t", partition=2,
                                 offsets=offsets, cutoff_ms=1_000)
    assert [None if v is None else v.value for v in column] == [10_000, None, 30_000, None]
    assert for_wm.tolist() == [10, 200, 30, 9_000]
    column, for_wm, ignored = watermark_times(spec(field="ts", onMalformed="null"), "null", raw, kafka_ts,
                                              topic="t", partition=2, offsets=offsets, cutoff_ms=1_000)
    assert ignored.tolist() == [False, False, False, True]  # its Kafka timestamp is beyond it too
    # no cut-off: nothing changes
    column, for_wm, ignored = watermark_times(spec(field="ts"), "fail", raw, kafka_ts, topic="t", partition=2,
                                              offsets=offsets, cutoff_ms=None)
    assert for_wm.tolist() == [10, 5_000, 30, 6_000] and ignored is None


def test_a_kafka_timestamp_beyond_the_cut_off_fails_or_counts_for_nothing():
    kafka_ts = np.array([100, 5_000, 300], np.int64)
    offsets = np.array([7, 8, 9], np.int64)
    raw = values(b"a", b"b", b"c")
    beyond = r"offset 8 of topic 't' partition 2 has a timestamp 5000 later than the batch's cut-off 1000"
    with pytest.raises(MalformedEventTimeError, match=beyond + r".*onMalformed=null"):
        watermark_times(None, "fail", raw, kafka_ts, topic="t", partition=2, offsets=offsets, cutoff_ms=1_000)
    column, for_wm, ignored = watermark_times(None, "null", raw, kafka_ts, topic="t", partition=2,
                                              offsets=offsets, cutoff_ms=1_000)
    assert column is None and for_wm.tolist() == [100, 5_000, 300]
    assert ignored.tolist() == [False, True, False]
    assert watermark_times(None, "fail", raw, kafka_ts, topic="t", partition=2, offsets=offsets,
                           cutoff_ms=5_000)[2] is None  # at the cut-off is not beyond it


def test_on_malformed_without_a_field_is_accepted_with_a_cut_off():
    opts = Options({"eventTime.onMalformed": "null"})
    assert EventTimeSpec.parse(opts, future_cutoff=True) is None
    with pytest.raises(OptionError, match=r"eventTime.format.*unless eventTime.field"):
        EventTimeSpec.parse(Options({"eventTime.format": "iso8601"}), future_cutoff=True)


@pytest.mark.parametrize("fmt", ["epochMillis", "epochSeconds"])
def test_numbers_that_are_no_time_are_malformed_not_an_arrow_error(fmt):
    """A typed value's number (int64 or double) beyond years 1-9999, NaN or ±inf: null, so
    ``eventTime.onMalformed`` decides (a safe cast raised ArrowInvalid in ``latestOffset``)."""
    spec = EventTimeSpec(("ts",), fmt)
    longs = pa.array([2**53 + 1, 2**62, -(2**63), 2**63 - 1, 1_767_225_600, None], pa.int64())
    doubles = pa.array([float("nan"), float("inf"), -float("inf"), 1e300, -1e300, 1_767_225_600.5])
    scale = 1000 if fmt == "epochSeconds" else 1
    assert spec._to_us(longs).to_pylist() == [None] * 4 + [1_767_225_600 * scale * 1000, None]
    assert spec._to_us(doubles).to_pylist() == [None] * 5 + [int(1_767_225_600.5 * scale) * 1000]
