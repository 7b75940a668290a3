"""Event time from a JSON field of the value: vectorized path, record-by-record path, policies."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jetspark.datasources.kafka_event_time import (
    EventTimeSpec,
    MalformedEventTimeError,
    event_times,
    extract_ms,
)
from jetspark.errors import OptionError
from jetspark.options import Options


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
                     values({"t": "2024-01-01T00:00:00.250Z"}, {"t": "2024-01-01T02:00:00+02:00"}))
    assert iso.to_pylist() == [1_704_067_200_250, 1_704_067_200_000]


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
