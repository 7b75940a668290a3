"""JSON documents into typed columns (``value.format=json-schema``): one Arrow parse per batch,
and every document that does not fit found alone, with why. A property test checks any mix of
good and bad documents against a reference that reads each with ``json.loads``."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from jetspark.schemas.json_values import decode

ORDER = pa.struct([("id", pa.int64()), ("due", pa.date32()), ("placed", pa.timestamp("us", tz="UTC")),
                   ("lines", pa.list_(pa.struct([("sku", pa.string()), ("qty", pa.int64())])))])


def _decode(payloads: list[bytes | None], keep: list[bool] | None = None):
    array = pa.array(payloads, pa.binary())
    mask = np.array(keep if keep is not None else [p is not None for p in payloads])
    return decode(array, mask, ORDER)


def test_documents_decode_by_field_name_and_each_misfit_says_why():
    decoded, bad, why = _decode([
        b'{"id": 1, "due": "2026-01-02", "placed": "2026-01-01T01:00:00+01:00", "other": [1, {}],'
        b' "lines": [{"sku": "a", "qty": 2}]}',
        b'{"id":\n 2}',            # a line break inside a document is white space
        None,                      # a tombstone: no value, no error
        b"   ",
        b'{"id": "x"}',
        b'{"id": 3}{"id": 4}',
        b"[1]",
        b'{"due": "2026-13-01"}',
        b'{"id": 5}',
    ])
    utc = dt.UTC
    assert decoded.to_pylist() == [
        {"id": 1, "due": dt.date(2026, 1, 2), "placed": dt.datetime(2026, 1, 1, tzinfo=utc),
         "lines": [{"sku": "a", "qty": 2}]},
        {"id": 2, "due": None, "placed": None, "lines": None},
        None, None, None, None, None, None,
        {"id": 5, "due": None, "placed": None, "lines": None},
    ]
    assert bad.tolist() == [3, 4, 5, 6, 7]
    assert why[0] == "an empty document"
    assert why[1].startswith("does not fit the schema") and "/id" in why[1]
    assert why[2] == "not one JSON object"
    assert "array" in why[3]
    assert "2026-13-01" in why[4]


def test_rows_not_kept_are_null_without_a_reason():
    decoded, bad, why = _decode([b'{"id": 1}', b"garbage", b'{"id": 2}'], keep=[True, False, True])
    assert [r and r["id"] for r in decoded.to_pylist()] == [1, None, 2]
    assert bad.tolist() == [] and why == []


def _reference(payload: bytes | None) -> int | str | None:
    """The id a document holds, None for none, "bad" when it does not fit ``{"id": integer}``."""
    if payload is None:
        return None
    try:
        doc = json.loads(payload)
    except ValueError:
        return "bad"
    if not isinstance(doc, dict):
        return "bad"
    value = doc.get("id")
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return "bad"


DOCUMENT = st.one_of(
    st.integers(-2**62, 2**62).map(lambda i: json.dumps({"id": i}).encode()),
    st.just(b'{"name": "no id"}'),
    st.sampled_from([b'{"id": "x"}', b'{"id": 1.5}', b"[]", b"{", b"7", b'{"id": true}', b"  "]),
    st.none(),
)


@given(st.lists(DOCUMENT, max_size=80))
def test_any_mix_of_documents_equals_reading_each_alone(payloads):
    keep = np.array([p is not None for p in payloads], bool)
    decoded, bad, _why = decode(pa.array(payloads, pa.binary()), keep, pa.struct([("id", pa.int64())]))
    expected = [_reference(p) for p in payloads]
    assert bad.tolist() == [i for i, e in enumerate(expected) if e == "bad"]
    got = [None if r is None else r["id"] for r in decoded.to_pylist()]
    assert got == [None if e == "bad" else e for e in expected]
