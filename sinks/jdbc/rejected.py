"""Rows PostgreSQL refuses: find each one in a COPY, and keep it in the dead-letter table.

A row is *rejected* when PostgreSQL refuses it for its own data: SQLSTATE class 22 (a data
exception: a NUL character or invalid UTF-8 in text, a value too long, out of range or not
valid input for the column's type) or class 23 (a NOT NULL, CHECK, UNIQUE or FOREIGN KEY
constraint). Any other error (connection, permission, lock timeout …) fails the task as
before.

With ``onRejected=dead-letter`` (the default) every COPY runs under a savepoint. When it fails
with a rejection, the transaction goes back to the savepoint and the rows are copied again in
pieces: the rows before the one PostgreSQL names (its ``COPY …, line N`` context), that row
alone, the rows after it; without a line (a foreign key, checked at the end of the
statement) the range is halved. A row refused on its own is a dead letter: it is written to
the dead-letter table, with the error, inside the same transaction as the other rows and the
marker, so with ``two-phase`` or ``task`` a dead letter is committed exactly once, when its
partition is. Rows keep their order (an upsert's last row of a key still wins). With
``onRejected=fail`` the task fails with the first rejection, naming the row and the option.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import psycopg
import pyarrow as pa
import pyarrow.compute as pc
from psycopg import sql

from jetspark.sinks.guarantees import FAIL
from jetspark.sinks.jdbc.arrow_copy import to_csv
from jetspark.sinks.jdbc.options import JdbcSinkOptions, TableName
from jetspark.sinks.jdbc.target import ensure_dead_letter_table
from jetspark.sinks.transactional import PartitionKey, SinkError

SAVEPOINT = sql.Identifier("jetspark_rows")
DEAD_LETTER_COLUMNS = "sink_id, batch_id, partition_id, row_json, sqlstate, error"
_REJECTING_CLASSES = ("22", "23")
_LINE_RE = re.compile(r"\bCOPY [^\n]*?, line (\d+)")
_COLUMN_RE = re.compile(r"\bCOPY [^\n]*?, line \d+, column ([^:\n]+):")

CopyRows = Callable[[pa.RecordBatch], None]


@dataclass(frozen=True)
class Rejection:
    """A row PostgreSQL refused on its own: its index in the batch and the error."""

    row: int
    sqlstate: str
    error: str


def is_rejection(e: psycopg.Error) -> bool:
    """Whether PostgreSQL refused the data itself (SQLSTATE class 22 or 23)."""
    return (e.sqlstate or "")[:2] in _REJECTING_CLASSES


def describe(e: psycopg.Error) -> str:
    """The server's message, its detail and the column it names."""
    text = e.diag.message_primary or str(e).splitlines()[0]
    if e.diag.message_detail:
        text += f" ({e.diag.message_detail})"
    column = _COLUMN_RE.search(e.diag.context or "")
    if column:
        text += f"; column {column.group(1)}"
    return text


def copy_batch(conn: psycopg.Connection, statement: sql.Composable, batch: pa.RecordBatch,
               key: PartitionKey, options: JdbcSinkOptions) -> int:
    """COPY ``batch`` with ``statement`` in the open transaction of ``conn``, a rejected row
    handled as ``onRejected`` says; the number of rows refused (and written as dead letters)."""

    def copy_rows(rows: pa.RecordBatch) -> None:
        with conn.cursor().copy(statement) as copy:
            copy.write(memoryview(to_csv(rows)))

    if options.on_rejected == FAIL:
        try:
            copy_rows(batch)
        except psycopg.Error as e:
            if is_rejection(e):
                raise refused(e, key, options) from None
            raise
        return 0
    rejected = copy_rejecting(conn, copy_rows, batch)
    if rejected:
        ensure_dead_letter_table(options)
        insert_dead_letters(conn, options.dead_letter_table, key, batch, rejected)
    return len(rejected)


def copy_rejecting(conn: psycopg.Connection, copy_rows: CopyRows, batch: pa.RecordBatch) -> list[Rejection]:
    """COPY ``batch`` inside the open transaction of ``conn`` and return the rows refused.

    ``copy_rows`` COPYs a slice. Every other row is in the table afterwards, in order."""
    lines = _line_counts(batch)
    rejected: list[Rejection] = []
    todo = [(0, batch.num_rows)]  # a stack: the leftmost range is on top
    while todo:
        lo, hi = todo.pop()
        conn.execute(sql.SQL("SAVEPOINT {}").format(SAVEPOINT))
        try:
            copy_rows(batch.slice(lo, hi - lo))
        except psycopg.Error as e:
            if not is_rejection(e):
                raise  # the task's transaction is rolled back as a whole
            conn.execute(sql.SQL("ROLLBACK TO SAVEPOINT {}").format(SAVEPOINT))
            if hi - lo == 1:
                rejected.append(Rejection(lo, e.sqlstate or "", describe(e)))
                continue
            named = _named_row(e, lines, lo, hi)
            pieces = ([(lo, named), (named, named + 1), (named + 1, hi)] if named is not None
                      else [(lo, (lo + hi) // 2), ((lo + hi) // 2, hi)])
            todo.extend(p for p in reversed(pieces) if p[0] < p[1])
            continue
        conn.execute(sql.SQL("RELEASE SAVEPOINT {}").format(SAVEPOINT))
    return rejected


def refused(e: psycopg.Error, key: PartitionKey, options: JdbcSinkOptions) -> SinkError:
    """The error of ``onRejected=fail``: which row, why, and the option that keeps such rows."""
    return SinkError(
        f"jetjdbc: PostgreSQL refused a row of batch {key.batch_id}, partition {key.partition_id} "
        f"for table {options.table} (SQLSTATE {e.sqlstate}): {options.scrub(describe(e))}. With "
        f"onRejected=fail the query stops here; onRejected=dead-letter (the default) writes such "
        f"rows to the dead-letter table {options.dead_letter_table} and goes on")


def _line_counts(batch: pa.RecordBatch) -> np.ndarray:
    """How many CSV lines each row takes: one, plus the line feeds inside its text values
    (PostgreSQL's ``line N`` counts them; binary values are sent as hex, numbers have none)."""
    counts = np.ones(batch.num_rows, dtype=np.int64)
    for column in batch.columns:
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            feeds = pc.fill_null(pc.count_substring(column, "\n"), 0)
            counts += feeds.to_numpy(zero_copy_only=False).astype(np.int64)
    return counts


def _named_row(e: psycopg.Error, lines: np.ndarray, lo: int, hi: int) -> int | None:
    """The row of ``[lo, hi)`` on the line PostgreSQL names, or None without a line. Only a
    hint: the row is tried again alone, so a wrong one costs a COPY, never a wrong result."""
    m = _LINE_RE.search(e.diag.context or "")
    if m is None:
        return None
    ends = np.cumsum(lines[lo:hi])  # the last line of each row of the slice
    line = int(m.group(1))
    return lo + int(np.searchsorted(ends, line)) if 1 <= line <= ends[-1] else None


# -- the dead-letter table ------------------------------------------------------------------


def insert_dead_letters(conn: psycopg.Connection, table: TableName, key: PartitionKey,
                        batch: pa.RecordBatch, rejected: list[Rejection]) -> None:
    """Write ``rejected`` rows of ``batch`` to the dead-letter table, in the open transaction."""
    statement = sql.SQL("INSERT INTO {} ({}) VALUES (%s, %s, %s, %s, %s, %s)").format(
        sql.Identifier(*table.parts()), sql.SQL(DEAD_LETTER_COLUMNS))
    rows = [(key.sink_id, key.batch_id, key.partition_id, row_json(batch, r.row), r.sqlstate, r.error)
            for r in rejected]
    with conn.cursor() as cur:
        cur.executemany(statement, rows)


def row_json(batch: pa.RecordBatch, index: int) -> str:
    """One row as a JSON object, with every value kept apart: text that is not UTF-8 as
    ``\\xNN``, a NUL as ``\\u0000``, binary as hex, NaN and infinities as strings."""
    row = batch.slice(index, 1)
    out = {}
    for name, column in zip(row.schema.names, row.columns, strict=True):
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            as_bytes = pa.large_binary() if pa.types.is_large_string(column.type) else pa.binary()
            raw = column.cast(as_bytes)[0].as_py()
            out[name] = None if raw is None else raw.decode("utf-8", errors="backslashreplace")
        else:
            out[name] = _plain(column[0].as_py())
    return json.dumps(out, ensure_ascii=False, default=str)


def _plain(value: object) -> object:
    if isinstance(value, bytes):
        return "\\x" + value.hex()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value

