"""The non-transactional-protocol PostgreSQL writes: plain COPY and COPY-staged upserts."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from psycopg import sql

from jetspark import faults
from jetspark.sinks.jdbc.sessions import session
from jetspark.sinks.jdbc.target import PostgresTarget
from jetspark.sinks.transactional import DURING_WRITE, PartitionKey

if TYPE_CHECKING:  # pyarrow and the COPY with rejects: in the writing task only, not the commit runner
    import pyarrow as pa

STAGING = "jetspark_staging"
STORED = "jetspark_stored"


class Written(NamedTuple):
    """A task's rows written, and those the table refused (dead letters, ``onRejected``)."""

    rows: int
    rejected: int


def copy_append(target: PostgresTarget, key: PartitionKey, batches: Iterable[pa.RecordBatch]) -> Written:
    """``commit=none`` (at-least-once): COPY every batch into the table in one transaction per task."""
    with session(target.options, autocommit=False) as conn:
        from jetspark.sinks.jdbc.rejected import RejectingCopy

        copy = RejectingCopy(conn, target.copy_sql(), key, target.options)
        for batch in batches:
            if batch.num_rows:
                copy.write(batch)
                faults.point(DURING_WRITE)
        conn.commit()
    return Written(copy.rows, copy.rejected)


def copy_upsert(target: PostgresTarget, key: PartitionKey, batches: Iterable[pa.RecordBatch]) -> Written:
    """``commit=upsert``: COPY into a temporary staging table, then one INSERT … ON CONFLICT.

    Within one task, the last row of a key wins (rows keep their order in the staging
    table). Replays write the same rows again and converge to the same table. With
    ``finalColumn``, a stored row whose column is true is not updated again: a replayed or
    stray provisional row never overwrites a final one, and the final row is written once.
    The staging table has the table's CHECK and NOT NULL constraints, so the rows they refuse
    are rejected there, one by one (``onRejected``).
    """
    options = target.options
    staging = sql.Identifier("pg_temp", STAGING)  # never another schema's table of that name
    with session(options, autocommit=False) as conn, conn.cursor() as cur:
        cur.execute(sql.SQL("CREATE TEMPORARY TABLE {} (LIKE {} INCLUDING DEFAULTS INCLUDING CONSTRAINTS) "
                            "ON COMMIT DROP").format(staging, target.table_sql))
        from jetspark.sinks.jdbc.rejected import RejectingCopy

        copy = RejectingCopy(conn, target.copy_sql(staging), key, options)
        for batch in batches:
            if batch.num_rows:
                copy.write(batch)
                faults.point(DURING_WRITE)
        if copy.rows:
            cur.execute(upsert_sql(target))
        conn.commit()
    return Written(copy.rows, copy.rejected)


def upsert_sql(target: PostgresTarget) -> sql.Composed:
    keys = target.options.keys
    cols = sql.SQL(", ").join(map(sql.Identifier, target.columns))
    key_cols = sql.SQL(", ").join(map(sql.Identifier, keys))
    others = [c for c in target.columns if c not in keys]
    action = (sql.SQL("DO UPDATE SET ") + sql.SQL(", ").join(
        sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in others)
        if others else sql.SQL("DO NOTHING"))
    table: sql.Composable = target.table_sql
    final = target.options.final_column
    if others and final is not None:  # the stored row, by an alias: the table may be schema-qualified
        table = sql.SQL("{} AS {}").format(table, sql.Identifier(STORED))
        action += sql.SQL(" WHERE {}.{} IS NOT TRUE").format(sql.Identifier(STORED), sql.Identifier(final))
    return sql.SQL(
        "INSERT INTO {table} ({cols}) SELECT DISTINCT ON ({keys}) {cols} FROM {staging} "
        "ORDER BY {keys}, ctid DESC ON CONFLICT ({keys}) {action}").format(
        table=table, cols=cols, keys=key_cols, staging=sql.Identifier("pg_temp", STAGING), action=action)
