"""DataFrame schema versus PostgreSQL table: type mapping, compatibility check, DDL.

Everything here is pure: the catalog rows come from :mod:`jetspark.sinks.jdbc.target`.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import sql
from pyspark.sql import types as T

from jetspark.sinks.jdbc.options import TableName
from jetspark.sinks.transactional import SinkError

# Spark type → PostgreSQL type for CREATE TABLE.
_CREATE_TYPES: dict[type, str] = {
    T.LongType: "bigint",
    T.IntegerType: "integer",
    T.ShortType: "smallint",
    T.ByteType: "smallint",
    T.FloatType: "real",
    T.DoubleType: "double precision",
    T.StringType: "text",
    T.VarcharType: "text",
    T.CharType: "text",
    T.BooleanType: "boolean",
    T.BinaryType: "bytea",
    T.DateType: "date",
    T.TimestampType: "timestamptz",
    T.TimestampNTZType: "timestamp",
}

_NUMERIC = {"numeric"}
# PostgreSQL type names (pg_type.typname) a Spark type may be COPY-ed into.
_ACCEPTS: dict[type, set[str]] = {
    T.LongType: {"int8"} | _NUMERIC,
    T.IntegerType: {"int4", "int8"} | _NUMERIC,
    T.ShortType: {"int2", "int4", "int8"} | _NUMERIC,
    T.ByteType: {"int2", "int4", "int8"} | _NUMERIC,
    T.FloatType: {"float4", "float8"} | _NUMERIC,
    T.DoubleType: {"float8"} | _NUMERIC,
    T.DecimalType: {"float8"} | _NUMERIC,
    T.BooleanType: {"bool"},
    T.BinaryType: {"bytea"},
    T.DateType: {"date", "timestamp", "timestamptz"},
    T.TimestampType: {"timestamptz", "timestamp"},
    T.TimestampNTZType: {"timestamp", "timestamptz"},
}
# A string goes into any type whose text input parses it: these pg_type.typcategory values
# (S string, U user-defined such as json/jsonb/uuid/xml/citext, E enum, I network address).
_STRING_CATEGORIES = {"S", "U", "E", "I"}
_STRING_TYPES = (T.StringType, T.VarcharType, T.CharType)


@dataclass(frozen=True)
class TableColumn:
    """One column of the target table as the catalog describes it."""

    name: str
    type_name: str  # pg_type.typname, e.g. int8
    display_type: str  # format_type(), e.g. bigint
    category: str  # pg_type.typcategory
    not_null: bool
    has_default: bool


def create_type(field: T.StructField) -> str:
    """The PostgreSQL column type for a DataFrame field (for ``createTable``)."""
    dt = field.dataType
    if isinstance(dt, T.DecimalType):
        return f"numeric({dt.precision},{dt.scale})"
    pg = _CREATE_TYPES.get(type(dt))
    if pg is None:
        raise SinkError(f"column {field.name!r}: Spark type {dt.simpleString()} is not supported by "
                        f"jetjdbc (supported: numbers, decimal, string, boolean, binary, date, "
                        f"timestamp, timestamp_ntz)")
    return pg


def create_table_sql(table: TableName, schema: T.StructType, keys: tuple[str, ...]) -> sql.Composed:
    """``CREATE TABLE IF NOT EXISTS`` with the DataFrame's columns (and keys as primary key)."""
    columns = [
        sql.SQL("{} {}{}").format(
            sql.Identifier(f.name), sql.SQL(create_type(f)),
            sql.SQL(" NOT NULL" if (not f.nullable or f.name in keys) else ""))
        for f in schema.fields
    ]
    if keys:
        columns.append(sql.SQL("PRIMARY KEY ({})").format(
            sql.SQL(", ").join(map(sql.Identifier, keys))))
    return sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(
        sql.Identifier(*table.parts()), sql.SQL(", ").join(columns))


def check_supported(schema: T.StructType) -> None:
    """Raise for DataFrame column types jetjdbc cannot write."""
    for f in schema.fields:
        if not isinstance(f.dataType, T.DecimalType):
            create_type(f)


def mismatches(schema: T.StructType, columns: list[TableColumn], keys: tuple[str, ...]) -> list[str]:
    """Every problem writing ``schema`` into a table with ``columns``; empty when compatible."""
    by_name = {c.name: c for c in columns}
    problems = []
    for f in schema.fields:
        col = by_name.get(f.name)
        if col is None:
            hint = [c.name for c in columns if c.name.lower() == f.name.lower()]
            problems.append(f"column {f.name!r} of the DataFrame is not in the table"
                            + (f" (names are case-sensitive; the table has {hint[0]!r})" if hint else ""))
            continue
        if not _accepts(f.dataType, col):
            problems.append(f"column {f.name!r}: DataFrame type {f.dataType.simpleString()} cannot be "
                            f"written into table type {col.display_type}")
    written = set(schema.fieldNames())
    for col in columns:
        if col.name not in written and col.not_null and not col.has_default:
            problems.append(f"table column {col.name!r} is NOT NULL without a default, and the "
                            f"DataFrame has no such column")
    for k in keys:
        if k not in written:
            problems.append(f"key column {k!r} is not a column of the DataFrame")
    return problems


def _accepts(dt: T.DataType, col: TableColumn) -> bool:
    if isinstance(dt, _STRING_TYPES):
        return col.category in _STRING_CATEGORIES
    accepted = _ACCEPTS.get(type(dt))
    return accepted is not None and col.type_name in accepted
