"""Confluent's wire format taken apart and put together for a whole column at once,
against a per-record reference."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jetspark.schemas import wire


def _reference(value: bytes | None) -> tuple[int, bytes | None]:
    if value is None:
        return wire.NULL, None
    if len(value) < 5 or value[0] != 0:
        return wire.UNFRAMED, None
    return struct.unpack(">I", value[1:5])[0], value[5:]


values = st.one_of(
    st.none(),
    st.binary(max_size=12),
    st.tuples(st.integers(0, 2**32 - 1), st.binary(max_size=12)).map(
        lambda t: b"\x00" + struct.pack(">I", t[0]) + t[1]),
)


@given(st.lists(values, max_size=30), st.integers(0, 5))
def test_split_matches_the_per_record_reading(column, skip):
    """Any values, nulls and unframed ones among them, in an array that may be a slice."""
    array = pa.array(column, pa.binary()).slice(min(skip, len(column)))
    framed = wire.split(array)
    expected = [_reference(v) for v in column[min(skip, len(column)):]]
    assert framed.schema_ids.tolist() == [i for i, _ in expected]
    assert framed.payloads.to_pylist() == [p for _, p in expected]


@given(st.lists(st.tuples(st.integers(0, 2**31 - 1), st.one_of(st.none(), st.binary(max_size=20))),
                max_size=30), st.integers(0, 3))
def test_frame_then_split_gives_back_ids_and_payloads(records, skip):
    """Nulls (tombstones) stay null; the column may be a slice."""
    ids = np.array([i for i, _ in records], np.int64)[min(skip, len(records)):]
    payloads = pa.array([p for _, p in records], pa.binary()).slice(min(skip, len(records)))
    records = records[min(skip, len(records)):]
    framed = wire.frame(ids, payloads)
    expected = [None if p is None else b"\x00" + struct.pack(">I", i) + p for i, p in records]
    assert framed.to_pylist() == expected
    back = wire.split(framed)
    assert back.schema_ids.tolist() == [wire.NULL if p is None else i for i, p in records]
    assert back.payloads.to_pylist() == [p for _, p in records]


def test_frame_refuses_ids_a_registry_cannot_have():
    for bad in (-1, 2**31):
        with pytest.raises(ValueError, match=f"schema id {bad} is not in"):
            wire.frame(np.array([bad]), pa.array([b"x"]))


def test_ids_lists_the_distinct_schema_ids():
    framed = [b"\x00\x00\x00\x00\x07a", b"\x00\x00\x00\x00\x03", b"\x00\x00\x00\x00\x07"]
    column = pa.array([framed[0], None, b"x", framed[1], framed[2]])
    assert wire.split(column).ids() == [3, 7]
