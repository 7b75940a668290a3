"""Driver-side checks before a ``jetjdbc`` write starts, and the resulting write target.

``prepare_target`` runs when Spark creates the writer (query start, and again for each
driver commit): it fails with a clear message — before any row is written — when the
server cannot do what the commit needs, or when the DataFrame does not fit the table.

It also resolves the table once to schema and name (an unqualified name through the
session's ``search_path``, as PostgreSQL would), and the marker and dead-letter tables with
it: every statement of the write names them qualified, so a table of the same name that
another role creates later in a schema earlier in ``search_path`` is never written to. A
table owned by another role runs that role's code (triggers, defaults, CHECKs, index
expressions, policies) as the sink's role on every write: warned about, or refused with
``trustTableOwner=false``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import psycopg
from psycopg import errors, sql
from pyspark.sql import types as T

from jetspark.sinks.guarantees import DEAD_LETTER, TASK, TWO_PHASE, UPSERT
from jetspark.sinks.jdbc.options import DEAD_LETTER_SUFFIX, DEFAULT_MARKER_TABLE, JdbcSinkOptions, TableName
from jetspark.sinks.jdbc.schema import TableColumn, check_supported, create_table_sql, mismatches
from jetspark.sinks.jdbc.sessions import session
from jetspark.sinks.transactional import SinkError

MARKER_COLUMNS = "sink_id, batch_id, partition_id, attempt, row_count"
DEAD_LETTER_COLUMNS = ("sink_id", "batch_id", "partition_id", "row_json", "sqlstate", "error")
_dead_letter_tables: set[tuple[str, TableName]] = set()
"""Dead-letter tables this process has seen exist (server, table): created or checked once."""
_warned_owners: set[tuple[str, TableName, str]] = set()
"""(server, table, owner) already warned about in this process: once, not every micro-batch."""
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PostgresTarget:
    """Where and what a ``jetjdbc`` task writes: the options and the DataFrame's columns."""

    options: JdbcSinkOptions
    columns: tuple[str, ...]

    def copy_sql(self, table: sql.Composable | None = None) -> sql.Composed:
        return sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv)").format(
            table if table is not None else self.table_sql,
            sql.SQL(", ").join(map(sql.Identifier, self.columns)))

    @property
    def table_sql(self) -> sql.Identifier:
        return sql.Identifier(*self.options.table.parts())

    @property
    def marker_sql(self) -> sql.Identifier:
        return sql.Identifier(*self.options.marker_table.parts())


def prepare_target(options: JdbcSinkOptions, schema: T.StructType, overwrite: bool) -> PostgresTarget:
    """Check server, table and DataFrame; create the table and marker table when needed."""
    check_supported(schema)
    if overwrite and options.commit != UPSERT:
        raise SinkError(f"jetjdbc cannot overwrite (complete output mode / SaveMode.Overwrite) with "
                        f"commit={options.commit}; use commit=upsert with keys (upserts)")
    with session(options) as conn:
        if options.commit == TWO_PHASE:
            check_prepared_transactions(conn, options)
        options = resolve_tables(conn, options)
        columns = table_columns(conn, options.table)
        if columns is None:
            if not options.create_table:
                raise SinkError(f"table {options.table} does not exist at {options.where}; create it or "
                                f"set the option createTable=true")
            _create_quietly(conn, create_table_sql(options.table, schema, options.keys))
            columns = table_columns(conn, options.table) or []
        check_table_owner(conn, options)
        problems = mismatches(schema, columns, options.keys)
        final = options.final_column
        if final is not None and not isinstance(_field(schema, final), T.BooleanType):
            problems.append(f"finalColumn {final!r} must be a boolean column of the DataFrame "
                            f"(its columns: {', '.join(schema.fieldNames())})")
        if problems:
            raise SinkError(f"the DataFrame does not fit table {options.table}: " + "; ".join(problems))
        if options.commit == UPSERT:
            check_unique_keys(conn, options)
        if options.commit in (TWO_PHASE, TASK):
            ensure_marker_table(conn, options.marker_table)
            check_trusted(conn, options.marker_table, "marker table (option markerTable)")
        check_dead_letter_table(conn, options)
    return PostgresTarget(options, tuple(schema.fieldNames()))


def resolve_tables(conn: psycopg.Connection, options: JdbcSinkOptions) -> JdbcSinkOptions:
    """``options`` with the table, marker and dead-letter tables schema-qualified: an
    unqualified name is the table ``search_path`` finds now, or, when there is none, the one a
    CREATE would make (in ``current_schema()``); the default marker and dead-letter tables are
    in the table's schema."""
    table = _qualified(conn, options.table, "table")
    marker, dead_letter = options.marker_table, options.dead_letter_table
    marker = (table.sibling(DEFAULT_MARKER_TABLE) if marker == options.table.sibling(DEFAULT_MARKER_TABLE)
              else _qualified(conn, marker, "markerTable"))
    dead_letter = (table.with_suffix(DEAD_LETTER_SUFFIX)
                   if dead_letter == options.table.with_suffix(DEAD_LETTER_SUFFIX)
                   else _qualified(conn, dead_letter, "deadLetterTable"))
    return options.qualified(table, marker, dead_letter)


def _qualified(conn: psycopg.Connection, table: TableName, option: str) -> TableName:
    if table.schema:
        return table
    regclass = _regclass(conn, table)
    if regclass is not None:
        schema = conn.execute("SELECT relnamespace::regnamespace::text FROM pg_class WHERE oid = %s",
                              (regclass,)).fetchone()[0]
        return TableName(_unquoted(schema), table.name)
    schema = conn.execute("SELECT current_schema()").fetchone()[0]
    if schema is None:
        raise SinkError(f"table {table} (option {option}) is not qualified and the session's search_path "
                        f"names no existing schema to create it in; give it as schema.table")
    return TableName(schema, table.name)


def _unquoted(ident: str) -> str:
    """A name as ``regnamespace::text`` shows it (quoted when needed), unquoted."""
    return ident[1:-1].replace('""', '"') if ident.startswith('"') else ident


_OWNER_SQL = """
    WITH RECURSIVE mine(oid) AS (
        SELECT oid FROM pg_roles WHERE rolname = current_user
        UNION SELECT m.roleid FROM pg_auth_members m JOIN mine ON m.member = mine.oid)
    SELECT c.relowner::regrole::text, c.relowner IN (SELECT oid FROM mine) OR o.rolsuper, current_user::text
    FROM pg_class c JOIN pg_roles o ON o.oid = c.relowner WHERE c.oid = %s"""


def check_table_owner(conn: psycopg.Connection, options: JdbcSinkOptions) -> None:
    """The table's owner can run code as the sink's role on every write (triggers, column
    defaults, CHECKs, index expressions, row-level policies, in the upsert's staging copy too):
    trusted when it is the sink's role, a role it is a member of, or a superuser (who can do
    anything anyway); otherwise a warning, or a refusal with ``trustTableOwner=false``."""
    row = conn.execute(_OWNER_SQL, (_regclass(conn, options.table),)).fetchone()
    if row is None or row[1]:
        return
    owner, _, role = row
    text = (f"jetjdbc: table {options.table} at {options.where} is owned by role {owner}, not by the sink's "
            f"role {role} or a role it is a member of: {owner}'s triggers, column defaults, CHECK "
            f"constraints, index expressions and row-level policies on it run as {role} on every write")
    if not options.trust_table_owner:
        raise SinkError(f"{text}; refused (trustTableOwner=false). Write to a table owned by {role} (ALTER "
                        f"TABLE … OWNER TO {role}), or set trustTableOwner=true if {owner} is trusted")
    key = (options.conninfo, options.table, owner)
    if key not in _warned_owners:
        _warned_owners.add(key)
        log.warning("%s; set trustTableOwner=false to refuse such a table", text)


def _field(schema: T.StructType, name: str) -> T.DataType | None:
    return next((f.dataType for f in schema.fields if f.name == name), None)


def check_prepared_transactions(conn: psycopg.Connection, options: JdbcSinkOptions) -> None:
    value = int(conn.execute("SHOW max_prepared_transactions").fetchone()[0])
    if value <= 0:
        raise SinkError(
            f"commit=two-phase needs prepared transactions (PREPARE TRANSACTION), but the PostgreSQL "
            f"server at {options.where} has max_prepared_transactions = {value}. Set "
            f"max_prepared_transactions to at least the number of sink tasks writing at once (e.g. 64) "
            f"in postgresql.conf and restart the server, or use commit=task (still exactly-once: one "
            f"transaction per task, committed by the task; replays are skipped by marker)")


def table_columns(conn: psycopg.Connection, table: TableName) -> list[TableColumn] | None:
    """The table's columns in order, or None when the table does not exist."""
    regclass = _regclass(conn, table)
    if regclass is None:
        return None
    rows = conn.execute(
        """SELECT a.attname, COALESCE(bt.typname, t.typname), format_type(a.atttypid, a.atttypmod),
                  t.typcategory, a.attnotnull,
                  a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> ''
           FROM pg_attribute a
           JOIN pg_type t ON t.oid = a.atttypid
           LEFT JOIN pg_type bt ON t.typtype = 'd' AND bt.oid = t.typbasetype
           WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
           ORDER BY a.attnum""", (regclass,)).fetchall()
    return [TableColumn(*row) for row in rows]


def check_unique_keys(conn: psycopg.Connection, options: JdbcSinkOptions) -> None:
    """``INSERT … ON CONFLICT (keys)`` needs a primary key or unique index on exactly the keys."""
    rows = conn.execute(
        """SELECT array_agg(a.attname::text) FROM pg_index i
           JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
           WHERE i.indrelid = %s AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL
           GROUP BY i.indexrelid""", (_regclass(conn, options.table),)).fetchall()
    if not any(set(cols) == set(options.keys) for (cols,) in rows):
        keys = ", ".join(options.keys)
        raise SinkError(f"commit=upsert upserts with INSERT … ON CONFLICT ({keys}), which needs a "
                        f"primary key or unique index on exactly ({keys}) of table {options.table}; "
                        f"none exists (e.g. ALTER TABLE … ADD PRIMARY KEY ({keys}))")


def ensure_marker_table(conn: psycopg.Connection, marker: TableName) -> None:
    """The table of committed (sink, batch, partition) markers; one row per committed task."""
    if _regclass(conn, marker) is not None:
        return
    _create_quietly(conn, sql.SQL(
        """CREATE TABLE IF NOT EXISTS {} (
               sink_id text NOT NULL, batch_id bigint NOT NULL, partition_id integer NOT NULL,
               attempt integer NOT NULL, row_count bigint NOT NULL,
               committed_at timestamptz NOT NULL DEFAULT now(),
               PRIMARY KEY (sink_id, batch_id, partition_id))""").format(
        sql.Identifier(*marker.parts())))


def check_dead_letter_table(conn: psycopg.Connection, options: JdbcSinkOptions) -> None:
    """With ``onRejected=dead-letter``, an existing dead-letter table must have its columns:
    refused at start, not at the first refused row. A missing one is created when needed."""
    table = options.dead_letter_table
    if options.on_rejected != DEAD_LETTER:
        return
    columns = table_columns(conn, table)
    if columns is None:
        return
    check_trusted(conn, table, DEAD_LETTER_WHAT)
    missing = [c for c in DEAD_LETTER_COLUMNS if c not in {col.name for col in columns}]
    if missing:
        raise SinkError(f"the dead-letter table {table} (option deadLetterTable) exists without the columns "
                        f"{', '.join(missing)}; jetjdbc writes {', '.join(DEAD_LETTER_COLUMNS)} into it. "
                        f"Choose another table, or drop this one and let jetjdbc create it")
    _dead_letter_tables.add((options.conninfo, table))


def ensure_dead_letter_table(options: JdbcSinkOptions) -> None:
    """The dead-letter table (:mod:`.rejected`), created when missing, on a connection of its
    own: created inside a task's transaction, it would stay uncommitted while the transaction
    is prepared, and every other task creating it would wait for that."""
    table = options.dead_letter_table
    if (options.conninfo, table) in _dead_letter_tables:
        return
    with session(options) as conn:
        if _regclass(conn, table) is not None:
            check_trusted(conn, table, DEAD_LETTER_WHAT)
            _dead_letter_tables.add((options.conninfo, table))
            return
        try:
            _create_quietly(conn, sql.SQL(
                """CREATE TABLE IF NOT EXISTS {} (
                       sink_id text NOT NULL, batch_id bigint NOT NULL, partition_id integer NOT NULL,
                       row_json text NOT NULL, sqlstate text NOT NULL, error text NOT NULL,
                       rejected_at timestamptz NOT NULL DEFAULT now())""").format(
                sql.Identifier(*table.parts())))
        except psycopg.Error as e:
            why = options.scrub(str(e)).strip()
            raise SinkError(f"jetjdbc: PostgreSQL refused rows for table {options.table}, and the "
                            f"dead-letter table {table} for them cannot be created: {why}. Create it, "
                            f"choose another (option deadLetterTable), or set onRejected=fail") from None
        check_trusted(conn, table, DEAD_LETTER_WHAT)  # another role may have created it first
    _dead_letter_tables.add((options.conninfo, table))


DEAD_LETTER_WHAT = "dead-letter table (option deadLetterTable)"
TRUST_RULE = ("jetjdbc writes only to a marker or dead-letter table owned by the sink's role (or a role it "
              "is a member of), without triggers and without row-level security")
_TRUST_SQL = """
    WITH RECURSIVE mine(oid) AS (
        SELECT oid FROM pg_roles WHERE rolname = current_user
        UNION SELECT m.roleid FROM pg_auth_members m JOIN mine ON m.member = mine.oid)
    SELECT c.relowner::regrole::text, c.relowner IN (SELECT oid FROM mine), c.relkind::text,
           ARRAY(SELECT t.tgname::text FROM pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal
                 ORDER BY 1),
           c.relrowsecurity OR c.relforcerowsecurity
               OR EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid),
           current_user::text
    FROM pg_class c WHERE c.oid = %s"""


def check_trusted(conn: psycopg.Connection, table: TableName, what: str) -> None:
    """Refuse a marker or dead-letter table that another role could have planted or can change:
    it must be a plain table owned by the session's role or a role it is a member of (by
    ``GRANT``, not by being superuser), with no user trigger and no row-level security. Where
    another role can create tables in the schema (``public`` up to PostgreSQL 14), a planted
    table's trigger would run as the sink's role on every insert, and a forged marker would
    make recovery skip a batch."""
    row = conn.execute(_TRUST_SQL, (_regclass(conn, table),)).fetchone()
    if row is None:
        return  # dropped meanwhile: created again when needed, and checked then
    owner, owned, kind, triggers, row_security, role = row
    problems = []
    if not owned:
        problems.append(f"is owned by role {owner}, not by the sink's role {role} or a role it is "
                        f"a member of")
    if kind != "r":
        problems.append(f"is not a plain table (relkind {kind!r})")
    if triggers:
        problems.append(f"has the trigger(s) {', '.join(triggers)}")
    if row_security:
        problems.append("has row-level security enabled or policies")
    if problems:
        raise SinkError(
            f"jetjdbc refuses the {what} {table}: it {'; it '.join(problems)}. {TRUST_RULE}: another role's "
            f"table could run code as {role} on every insert or forge markers that make recovery skip a "
            f"batch. Drop it (jetjdbc creates its own), or check it and make it so (ALTER TABLE … OWNER "
            f"TO {role}; DROP TRIGGER; ALTER TABLE … DISABLE ROW LEVEL SECURITY), or choose another "
            f"table; and keep other roles from creating tables in the schema "
            f"(REVOKE CREATE ON SCHEMA public FROM PUBLIC)")


def _regclass(conn: psycopg.Connection, table: TableName) -> int | None:
    name = sql.Identifier(*table.parts()).as_string(conn)
    return conn.execute("SELECT to_regclass(%s)::oid", (name,)).fetchone()[0]


def _create_quietly(conn: psycopg.Connection, statement: sql.Composable) -> None:
    """CREATE … IF NOT EXISTS, tolerating a concurrent creator (a race on the catalog: the
    loser's error is a unique violation on pg_type, "relation already exists" or "type
    already exists", depending on where the two meet)."""
    try:
        conn.execute(statement)
    except (errors.UniqueViolation, errors.DuplicateTable, errors.DuplicateObject):
        pass
