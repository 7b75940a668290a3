"""Rows PostgreSQL refuses: find each one in a COPY, and keep it in the dead-letter table.

A row is *rejected* when PostgreSQL refuses it for its own data: SQLSTATE class 22 (a data
exception: a NUL character or invalid UTF-8 in text, a value too long, out of range or not
valid input for the column's type) or class 23 (a NOT NULL, CHECK, UNIQUE or FOREIGN KEY
constraint). Any other error (connection, permission, lock timeout, and ``22P04``, a COPY
framing error that would be jetspark's own) fails the task as before.

With ``onRejected=dead-letter`` (the default) a task's COPYs run under a savepoint taken every
:data:`WINDOW_ROWS` rows (past 8 windows, an eighth of the task's rows so far), and the batches
copied since it are kept. When a COPY fails with a rejection, the transaction goes back to the
savepoint, the kept batches are copied again (PostgreSQL took them already) and the failing
batch is *probed* under a savepoint: copied in pieces, each under a savepoint of its own: the
rows before the one PostgreSQL names (its ``COPY …, line N`` context), that row alone, and the
rows after it in halves; without a line (a foreign key, checked at the end of the statement)
the range is halved. A row refused alone is a rejection. A row a foreign key refused alone is
tried once more after the rest of its batch (its parent may be a later row of the batch).
Then the probe is rolled back and the rows that went in are copied again by one COPY, in the
batch's order (an upsert's last row of a key still wins), and the refused ones are written with
their error to the dead-letter table, both in the task's transaction: with ``two-phase`` or
``task`` committed once, with the partition's rows and marker.

Subtransactions: PostgreSQL caches 64 per transaction (``PGPROC_MAX_CACHED_SUBXIDS``); past
that every snapshot of every session looks transactions up in ``pg_subtrans``. A released
savepoint that wrote keeps its subtransaction until the end of the transaction; one rolled
back frees it. So a batch's probe leaves none behind: at most :data:`MAX_PIECES` pieces are
alive under it (then it is rolled back and the rows found good so far are copied again in one
COPY under it), and each window leaves one: a task of up to ~75 million rows stays within 64.
With ``onRejected=fail`` the task fails at the first rejection, naming the row, the reason and
the option.
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
from jetspark.sinks.jdbc.target import DEAD_LETTER_COLUMNS, ensure_dead_letter_table
from jetspark.sinks.transactional import PartitionKey, SinkError

WINDOW_ROWS = 100_000
"""Rows copied under one savepoint (one subtransaction), and kept in memory to copy again; past
:data:`WINDOW_GROWTH` windows, a window is this many or 1/WINDOW_GROWTH of the rows so far."""
WINDOW_GROWTH = 8
MAX_PIECES = 16
"""Released pieces alive under a batch's probe before they are folded into one COPY."""
_WINDOW = "jetspark_window"
_PROBE = "jetspark_probe"
_PIECE = "jetspark_rows"
_REJECTING_CLASSES = ("22", "23")
_NOT_REJECTIONS = ("22P04",)  # bad_copy_file_format: the CSV jetspark wrote, not the row's data
_FOREIGN_KEY = "23503"
_CONTEXT_RE = re.compile(r"\bCOPY [^\n]*?, line (\d+)(?:, column ([^:\n]+):)?")

CopyRows = Callable[[pa.RecordBatch], None]


@dataclass(frozen=True)
class Rejection:
    """A row PostgreSQL refused on its own: its index in the batch and the error."""

    row: int
    sqlstate: str
    error: str


def is_rejection(e: psycopg.Error) -> bool:
    """Whether PostgreSQL refused the data itself (SQLSTATE class 22 or 23)."""
    state = e.sqlstate or ""
    return state[:2] in _REJECTING_CLASSES and state not in _NOT_REJECTIONS


def describe(e: psycopg.Error) -> str:
    """The server's message, its detail and the column it names."""
    text = e.diag.message_primary or str(e).splitlines()[0]
    if e.diag.message_detail:
        text += f" ({e.diag.message_detail})"
    m = _CONTEXT_RE.search(e.diag.context or "")
    if m and m.group(2):
        text += f"; column {m.group(2)}"
    return text


class RejectingCopy:
    """The COPYs of one task's transaction, a rejected row handled as ``onRejected`` says.

    ``write`` one Arrow batch after another; ``rows`` and ``rejected`` count the rows written
    and those set aside as dead letters so far."""

    def __init__(self, conn: psycopg.Connection, statement: sql.Composable, key: PartitionKey,
                 options: JdbcSinkOptions) -> None:
        self.conn, self.statement, self.key, self.options = conn, statement, key, options
        self.rows = 0
        self.rejected = 0
        self._kept: list[pa.RecordBatch] = []
        self._kept_rows = 0
        self._in_window = False

    def write(self, batch: pa.RecordBatch) -> int:
        """COPY ``batch``; the number of its rows written (the others are dead letters)."""
        if self.options.on_rejected == FAIL:
            try:
                self._copy(batch)
            except psycopg.Error as e:
                if is_rejection(e):
                    raise refused(e, self.key, self.options, self._seen, _named_row(e, batch)) from None
                raise
            return self._count(batch.num_rows, 0)
        if not self._in_window:
            self._execute("SAVEPOINT {}", _WINDOW)
            self._in_window = True
        try:
            self._copy(batch)
        except psycopg.Error as e:
            if not is_rejection(e):
                raise  # the task's transaction is rolled back as a whole
            self._execute("ROLLBACK TO SAVEPOINT {0}; RELEASE SAVEPOINT {0}", _WINDOW)
            self._in_window = False
            for kept in self._kept:  # PostgreSQL took these already: it takes them again
                self._copy(kept)
            self._kept, self._kept_rows = [], 0
            rejected = copy_rejecting(self.conn, self._copy, batch, e)
            if rejected:
                ensure_dead_letter_table(self.options)
                insert_dead_letters(self.conn, self.options.dead_letter_table, self.key, batch, rejected)
            return self._count(batch.num_rows - len(rejected), len(rejected))
        self._kept.append(batch)
        self._kept_rows += batch.num_rows
        if self._kept_rows >= max(WINDOW_ROWS, self._seen // WINDOW_GROWTH):
            self._execute("RELEASE SAVEPOINT {}", _WINDOW)
            self._in_window = False
            self._kept, self._kept_rows = [], 0
        return self._count(batch.num_rows, 0)

    @property
    def _seen(self) -> int:
        return self.rows + self.rejected

    def _count(self, rows: int, rejected: int) -> int:
        self.rows += rows
        self.rejected += rejected
        return rows

    def _copy(self, rows: pa.RecordBatch) -> None:
        with self.conn.cursor().copy(self.statement) as copy:
            copy.write(memoryview(to_csv(rows)))

    def _execute(self, statement: str, name: str) -> None:
        self.conn.execute(sql.SQL(statement).format(sql.Identifier(name)))


def copy_rejecting(conn: psycopg.Connection, copy_rows: CopyRows, batch: pa.RecordBatch,
                   error: psycopg.Error) -> list[Rejection]:
    """COPY ``batch``, whose COPY as a whole failed with the rejection ``error``, without the
    rows PostgreSQL refuses, inside the open transaction of ``conn``; the rows refused. Every
    other row is in the table afterwards, in order, copied by one COPY at the caller's level:
    the probing leaves no subtransaction behind (see the module).

    Each failure splits its range: before the row PostgreSQL names, that row, and the rest in
    halves; or in halves without a name. So a batch costs O(n log n) rows sent at worst, when
    most of its rows are refused, and a few COPYs for a rare refused row."""
    lines = _line_counts(batch)
    good = np.zeros(batch.num_rows, dtype=bool)
    rejected: list[Rejection] = []
    retry: list[tuple[int, psycopg.Error]] = []
    probe = _Probe(conn, copy_rows, batch, good)
    todo = _split(error, lines, 0, batch.num_rows)  # a stack: the leftmost range is on top
    while todo:
        lo, hi = todo.pop()
        failure = probe.piece(lo, hi)
        if failure is None:
            continue
        if hi - lo > 1:
            todo.extend(_split(failure, lines, lo, hi))
        elif failure.sqlstate == _FOREIGN_KEY:
            retry.append((lo, failure))
        else:
            rejected.append(Rejection(lo, failure.sqlstate or "", describe(failure)))
    for row, _ in retry:  # its parent may have come later in the batch
        failure = probe.piece(row, row + 1)
        if failure is not None:
            rejected.append(Rejection(row, failure.sqlstate or "", describe(failure)))
    probe.end()
    if good.any():
        copy_rows(batch.filter(pa.array(good)))
    return sorted(rejected, key=lambda r: r.row)


class _Probe:
    """Pieces of a batch copied under the probe savepoint, each under one of its own; the rows
    that went in are marked in ``good``. At most :data:`MAX_PIECES` released pieces are alive:
    then the probe is rolled back and the good rows so far are copied again in one COPY."""

    def __init__(self, conn: psycopg.Connection, copy_rows: CopyRows, batch: pa.RecordBatch,
                 good: np.ndarray) -> None:
        self.conn, self.copy_rows, self.batch, self.good = conn, copy_rows, batch, good
        self.alive = 0
        _savepoint(conn, "SAVEPOINT {}", _PROBE)

    def piece(self, lo: int, hi: int) -> psycopg.Error | None:
        """COPY rows ``[lo, hi)``; the rejection that undid them, or None."""
        failure = _copy_piece(self.conn, self.copy_rows, self.batch.slice(lo, hi - lo))
        if failure is None:
            self.good[lo:hi] = True
            self.alive += 1
            if self.alive >= MAX_PIECES:
                self._fold()
        return failure

    def _fold(self) -> None:
        """Free the pieces' subtransactions: their rows again, in one COPY under the probe (the
        same rows in the same order went in piece by piece, so they go in together)."""
        _savepoint(self.conn, "ROLLBACK TO SAVEPOINT {}", _PROBE)
        self.copy_rows(self.batch.filter(pa.array(self.good)))
        self.alive = 0

    def end(self) -> None:
        """Roll the probe back: no subtransaction of it stays alive."""
        _savepoint(self.conn, "ROLLBACK TO SAVEPOINT {0}; RELEASE SAVEPOINT {0}", _PROBE)


def _savepoint(conn: psycopg.Connection, statement: str, name: str) -> None:
    conn.execute(sql.SQL(statement).format(sql.Identifier(name)))


def _copy_piece(conn: psycopg.Connection, copy_rows: CopyRows, rows: pa.RecordBatch) -> psycopg.Error | None:
    """COPY ``rows`` under a savepoint; the rejection that undid them, or None."""
    _savepoint(conn, "SAVEPOINT {}", _PIECE)
    try:
        copy_rows(rows)
    except psycopg.Error as e:
        if not is_rejection(e):
            raise
        _savepoint(conn, "ROLLBACK TO SAVEPOINT {0}; RELEASE SAVEPOINT {0}", _PIECE)
        return e
    _savepoint(conn, "RELEASE SAVEPOINT {}", _PIECE)
    return None


def _split(error: psycopg.Error, lines: np.ndarray, lo: int, hi: int) -> list[tuple[int, int]]:
    """The pieces of ``[lo, hi)`` to copy next, rightmost first (a stack)."""
    named = _row_on_line(error, lines, lo, hi)
    pieces = ([(lo, named), (named, named + 1), *_halves(named + 1, hi)] if named is not None
              else _halves(lo, hi))
    return [p for p in reversed(pieces) if p[0] < p[1]]


def _halves(lo: int, hi: int) -> list[tuple[int, int]]:
    mid = (lo + hi) // 2
    return [(lo, mid), (mid, hi)] if hi - lo > 1 else [(lo, hi)]


def refused(e: psycopg.Error, key: PartitionKey, options: JdbcSinkOptions, seen: int,
            named: int | None) -> SinkError:
    """The error of ``onRejected=fail``: which row, why, and the option that keeps such rows."""
    row = f"row {seen + named} of" if named is not None else "a row of"
    return SinkError(
        f"jetjdbc: PostgreSQL refused {row} batch {key.batch_id}, partition {key.partition_id} "
        f"for table {options.table} (SQLSTATE {e.sqlstate}): {options.scrub(describe(e))}. With "
        f"onRejected=fail the query stops here; onRejected=dead-letter (the default) writes such "
        f"rows to the dead-letter table {options.dead_letter_table} and goes on")


def _named_row(e: psycopg.Error, batch: pa.RecordBatch) -> int | None:
    return _row_on_line(e, _line_counts(batch), 0, batch.num_rows)


def _line_counts(batch: pa.RecordBatch) -> np.ndarray:
    """How many CSV lines each row takes: one, plus the line feeds inside its text values
    (PostgreSQL's ``line N`` counts them; binary values are sent as hex, numbers have none)."""
    counts = np.ones(batch.num_rows, dtype=np.int64)
    for column in batch.columns:
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            feeds = pc.fill_null(pc.count_substring(column, "\n"), 0)
            counts += feeds.to_numpy(zero_copy_only=False).astype(np.int64)
    return counts


def _row_on_line(e: psycopg.Error, lines: np.ndarray, lo: int, hi: int) -> int | None:
    """The row of ``[lo, hi)`` on the line PostgreSQL names, or None without a line. Only a
    hint: the row is tried again alone, so a wrong one costs a COPY, never a wrong result."""
    m = _CONTEXT_RE.search(e.diag.context or "")
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
        sql.Identifier(*table.parts()), sql.SQL(", ").join(map(sql.Identifier, DEAD_LETTER_COLUMNS)))
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
