"""jetjdbc's rejected rows: options, the row PostgreSQL names, dead-letter JSON (pure logic).
The COPY against a real server is in tests/integration/test_jdbc_sink.py."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest

from jetspark.errors import OptionError
from jetspark.sinks.jdbc.options import JdbcSinkOptions, TableName
from jetspark.sinks.jdbc.rejected import _line_counts, _row_on_line, describe, is_rejection, row_json

BASE = {"url": "postgresql://u@h:5432/db", "table": "analytics.events"}


def _error(sqlstate: str, context: str | None = None, primary: str = "refused", detail: str | None = None):
    diag = SimpleNamespace(context=context, message_primary=primary, message_detail=detail)
    return SimpleNamespace(sqlstate=sqlstate, diag=diag)


def test_on_rejected_defaults_to_a_dead_letter_table_beside_the_table():
    o = JdbcSinkOptions.parse(BASE)
    assert o.on_rejected == "dead-letter"
    assert o.dead_letter_table == TableName("analytics", "events_rejected")
    o = JdbcSinkOptions.parse({**BASE, "onRejected": "FAIL", "deadLetterTable": "audit.bad_rows"})
    assert (o.on_rejected, o.dead_letter_table) == ("fail", TableName("audit", "bad_rows"))


@pytest.mark.parametrize("raw, option", [
    ({**BASE, "onRejected": "skip"}, "onRejected"),
    ({**BASE, "deadLetterTable": "analytics.events"}, "deadLetterTable"),
    ({**BASE, "deadLetterTable": "a.b.c"}, "deadLetterTable"),
])
def test_bad_rejection_options_name_the_option(raw, option):
    with pytest.raises(OptionError) as e:
        JdbcSinkOptions.parse(raw)
    assert e.value.option == option


def test_a_long_table_name_gets_a_dead_letter_name_that_postgres_does_not_truncate():
    long = "t" * 63
    name = TableName(None, long).with_suffix("_rejected").name
    assert len(name.encode()) <= 63 and name.endswith("_rejected") and name != long
    other = TableName(None, "t" * 62 + "u").with_suffix("_rejected").name
    assert other != name  # the hash keeps two long names apart


def test_only_data_and_constraint_errors_are_rejections():
    assert is_rejection(_error("22021")) and is_rejection(_error("23505"))
    assert not is_rejection(_error("55P03")) and not is_rejection(_error("08006"))
    assert not is_rejection(_error("22P04"))  # bad COPY framing: jetspark's CSV, not the row


def test_describe_keeps_message_detail_and_column_not_the_line():
    e = _error("22001", 'COPY ev, line 1, column name: "toolongname"', "value too long", None)
    assert describe(e) == "value too long; column name"
    e = _error("23505", "COPY ev, line 1", "duplicate key", "Key (id)=(1) already exists.")
    assert describe(e) == "duplicate key (Key (id)=(1) already exists.)"
    # a row quoted in the context that looks like a context does not name a column
    e = _error("23514", 'COPY ev, line 3: "4,x, line 9, column y: z"', "violates check")
    assert describe(e) == "violates check"


def test_the_line_postgres_names_is_mapped_to_its_row_past_line_feeds_in_text():
    batch = pa.RecordBatch.from_pydict({"id": [0, 1, 2, 3, 4], "s": ["a", "b\nc\nd", None, "e\n", "f"],
                                        "t": ["x", "y", "z\n", "w", "v"]})
    lines = _line_counts(batch)
    assert lines.tolist() == [1, 3, 2, 2, 1]  # rows start on lines 1, 2, 5, 7, 9
    for line, row in [(1, 0), (2, 1), (4, 1), (5, 2), (7, 3), (8, 3), (9, 4)]:
        assert _row_on_line(_error("22021", f"COPY ev, line {line}"), lines, 0, 5) == row
    # within a slice lines count from its first row
    assert _row_on_line(_error("22021", "COPY ev, line 3"), lines, 2, 5) == 3
    assert _row_on_line(_error("23503", None), lines, 0, 5) is None  # a foreign key: no line
    assert _row_on_line(_error("22021", "COPY ev, line 99"), lines, 0, 5) is None
    assert isinstance(lines, np.ndarray)


def test_row_json_keeps_every_value_apart():
    batch = pa.RecordBatch.from_arrays(
        [pa.array(["a\x00b", "ok"]), pa.array([b"\x01\xff", None]), pa.array([float("nan"), float("-inf")]),
         pa.array([[1, 2], None], pa.list_(pa.int64()))],
        names=["s", "b", "f", "l"])
    first, second = (json.loads(row_json(batch, i)) for i in range(2))
    assert first == {"s": "a\x00b", "b": "\\x01ff", "f": "nan", "l": [1, 2]}
    assert second == {"s": "ok", "b": None, "f": "-inf", "l": None}
    assert "\\u0000" in row_json(batch, 0)  # a NUL is escaped: the text column can hold it


def test_row_json_of_text_that_is_not_utf8():
    invalid = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(np.array([0, 2], np.int32)),
                                                     pa.py_buffer(b"\xff\x01")])
    batch = pa.RecordBatch.from_arrays([invalid], names=["s"])
    assert json.loads(row_json(batch, 0)) == {"s": "\\xff\x01"}
