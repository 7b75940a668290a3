"""jetjdbc options, table names, schema checks and Arrow → COPY csv: pure logic."""

from __future__ import annotations

import datetime as dt
import re

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from jetspark.errors import OptionError
from jetspark.sinks.jdbc.arrow_copy import to_csv
from jetspark.sinks.jdbc.options import DEFAULT_MARKER_TABLE, JdbcSinkOptions, TableName
from jetspark.sinks.jdbc.resource import gid_of, parse_gid
from jetspark.sinks.jdbc.schema import TableColumn, check_supported, create_table_sql, mismatches
from jetspark.sinks.transactional import PartitionKey, SinkError

BASE = {"url": "postgresql://u@h:5432/db", "table": "events"}


def test_defaults_and_jdbc_url_prefix():
    o = JdbcSinkOptions.parse({**BASE, "url": "jdbc:postgresql://u@h/db"})
    assert o.conninfo == "postgresql://u@h/db"
    assert (o.guarantee, o.commit) == ("exactly-once", "two-phase")
    assert o.keys == () and o.sink_id is None and not o.create_table
    assert o.table == TableName(None, "events")
    assert o.marker_table == TableName(None, DEFAULT_MARKER_TABLE)


def test_dbtable_alias_schema_and_marker_table_follows_schema():
    o = JdbcSinkOptions.parse({"URL": BASE["url"], "dbtable": 'analytics."My.Table"',
                               "GUARANTEE": "At-Least-Once"})
    assert o.table == TableName("analytics", "My.Table")
    assert o.marker_table == TableName("analytics", DEFAULT_MARKER_TABLE)
    assert (o.guarantee, o.commit) == ("at-least-once", "none")


@pytest.mark.parametrize("raw, option", [
    ({**BASE, "guarantee": "exactly_once"}, "guarantee"),
    ({**BASE, "commit": "upsert"}, "keys"),
    ({**BASE, "guarantee": "at-least-once", "commit": "two-phase"}, "commit"),
    ({**BASE, "commit": "none"}, "commit"),
    ({**BASE, "mode": "idempotent", "keys": "id"}, "mode"),
    ({**BASE, "keys": "a,,b"}, "keys"),
    ({**BASE, "sinkId": "has:colon"}, "sinkId"),
    ({**BASE, "createTable": "maybe"}, "createTable"),
    ({**BASE, "table": "a.b.c"}, "table"),
    ({"url": BASE["url"]}, "table"),
    ({"table": "t"}, "url"),
    ({**BASE, "url": "jdbc:mysql://h/db"}, "url"),
    ({**BASE, "batchsize": "10"}, "batchsize"),
    ({**BASE, "finalColumn": "final"}, "finalColumn"),  # only with commit=upsert
    ({**BASE, "commit": "upsert", "keys": "k,final", "finalColumn": "final"}, "finalColumn"),
    ({**BASE, "socketTimeout": "30"}, "socketTimeout"),  # PgJDBC's bare seconds: refused, not 30 ms
    ({**BASE, "connectTimeout": "10"}, "connectTimeout"),
    ({**BASE, "connectTimeout": "0 seconds"}, "connectTimeout"),
    ({**BASE, "socketTimeout": "soon"}, "socketTimeout"),
])
def test_bad_options_name_option_value_and_accepted(raw, option):
    with pytest.raises(OptionError) as e:
        JdbcSinkOptions.parse(raw)
    assert e.value.option.lower() == option.lower()
    assert "accepted" in str(e.value)


def test_timeouts_default_reach_libpq_and_zero_unbounds_the_socket():
    o = JdbcSinkOptions.parse(BASE)
    assert (o.connect_timeout_ms, o.socket_timeout_ms) == (30_000, 300_000)
    assert o.connect_kwargs()["connect_timeout"] == "30"
    o = JdbcSinkOptions.parse({**BASE, "connectTimeout": "500ms", "socketTimeout": "0 seconds"})
    assert o.connect_kwargs()["connect_timeout"] == "2"  # libpq's least
    assert o.socket_timeout_ms == 0
    o = JdbcSinkOptions.parse({**BASE, "connectTimeout": "2.5 s"})
    assert o.connect_kwargs()["connect_timeout"] == "3"


def test_credentials_never_in_repr_or_messages():
    o = JdbcSinkOptions.parse({**BASE, "url": "postgresql://alice:s3cret@h/db?password=s3cret",
                               "password": "hunter2", "user": "alice"})
    assert "s3cret" not in repr(o) and "hunter2" not in repr(o)
    assert "s3cret" not in o.where
    assert o.scrub("failed for s3cret and hunter2 at postgresql://alice:s3cret@h/db") == (
        "failed for *** and *** at postgresql://alice:***@h/db")
    with pytest.raises(OptionError) as e:
        JdbcSinkOptions.parse({"url": "jdbc:mysql://bob:pw123@h/db", "table": "t"})
    assert "pw123" not in str(e.value)


def test_gid_round_trip_with_an_unguessable_nonce():
    key = PartitionKey("3fe81d21-79f9.x_y", 12, 3, 1)
    gid = gid_of(key)
    assert re.fullmatch(r"jetspark:3fe81d21-79f9\.x_y:12:3:1:[0-9a-f]{32}", gid)
    assert gid != gid_of(key)  # 128 random bits each time: no other role can take it first
    assert parse_gid(gid) == key
    assert parse_gid("jetspark:3fe81d21-79f9.x_y:12:3:1") == key  # the earlier form, without a nonce
    assert parse_gid("someone-else:1") is None and parse_gid("jetspark:a:b:c:d") is None
    assert parse_gid("jetspark:a:1:2:3:not-a-nonce") is None


SCHEMA = T.StructType([
    T.StructField("id", T.LongType(), False),
    T.StructField("name", T.StringType()),
    T.StructField("amount", T.DecimalType(10, 2)),
    T.StructField("ts", T.TimestampType()),
])


def _col(name, type_name, display=None, category="N", not_null=False, has_default=False):
    return TableColumn(name, type_name, display or type_name, category, not_null, has_default)


def test_compatible_schema_has_no_mismatch():
    cols = [_col("id", "int8"), _col("name", "jsonb", category="U"), _col("amount", "numeric"),
            _col("ts", "timestamptz", category="D"), _col("extra", "int4", has_default=True, not_null=True)]
    assert mismatches(SCHEMA, cols, ("id",)) == []


def test_mismatches_are_all_listed():
    cols = [_col("ID", "int8"), _col("name", "int4"), _col("amount", "numeric"),
            _col("ts", "bool", category="B"), _col("required", "text", category="S", not_null=True)]
    problems = " | ".join(mismatches(SCHEMA, cols, ("nokey",)))
    assert "column 'id' of the DataFrame is not in the table (names are case-sensitive" in problems
    assert "column 'name': DataFrame type string cannot be written into table type int4" in problems
    assert "'ts': DataFrame type timestamp cannot be written into table type bool" in problems
    assert "table column 'required' is NOT NULL without a default" in problems
    assert "key column 'nokey'" in problems


def test_unsupported_types_and_create_table_sql():
    with pytest.raises(SinkError, match="array<int> is not supported"):
        check_supported(T.StructType([T.StructField("xs", T.ArrayType(T.IntegerType()))]))
    ddl = create_table_sql(TableName("s", 'we"ird'), SCHEMA, ("id",))
    text = ddl.as_string(None)
    assert text == ('CREATE TABLE IF NOT EXISTS "s"."we""ird" ("id" bigint NOT NULL, "name" text, '
                    '"amount" numeric(10,2), "ts" timestamptz, PRIMARY KEY ("id"))')


def test_arrow_batch_as_copy_csv():
    batch = pa.RecordBatch.from_pydict({
        "s": pa.array(["a", "", None, 'q"u,o\nte'], pa.string()),
        "i": pa.array([1, None, 3, 4], pa.int64()),
        "b": pa.array([b"\x00\xff", None, b"", b"z"], pa.binary()),
        "t": pa.array([dt.datetime(2024, 1, 1, 1, 2, 3, 456789), None, None, None],
                      pa.timestamp("us", tz="UTC")),
    })
    lines = to_csv(batch).to_pybytes().decode()
    assert lines == ('"a",1,"\\x00ff",2024-01-01 01:02:03.456789Z\n'
                     '"",,,\n'
                     ',3,"\\x",\n'
                     '"q""u,o\nte",4,"\\x7a",\n')


def test_options_spark_itself_passes_are_accepted():
    # writeStream.queryName(...) / checkpointLocation / path reach the writer as options.
    opts = JdbcSinkOptions.parse({"url": "postgresql://h/db", "table": "t", "queryName": "q",
                                  "checkpointLocation": "/c", "path": "/p"})
    assert opts.table == TableName(schema=None, name="t")


def test_final_column_guards_the_upsert_of_a_stored_final_row():
    from jetspark.sinks.jdbc.plain import upsert_sql
    from jetspark.sinks.jdbc.target import PostgresTarget

    o = JdbcSinkOptions.parse({**BASE, "table": "s.w", "commit": "upsert", "keys": "k, window_start",
                               "finalColumn": "final"})
    assert o.final_column == "final"
    text = upsert_sql(PostgresTarget(o, ("k", "window_start", "n", "final"))).as_string(None)
    assert text.startswith('INSERT INTO "s"."w" AS "jetspark_stored" ')
    assert text.endswith('DO UPDATE SET "n" = EXCLUDED."n", "final" = EXCLUDED."final" '
                         'WHERE "jetspark_stored"."final" IS NOT TRUE')
    plain = JdbcSinkOptions.parse({**BASE, "commit": "upsert", "keys": "k"})
    assert "WHERE" not in upsert_sql(PostgresTarget(plain, ("k", "n"))).as_string(None)


@pytest.mark.parametrize(("option", "value", "instead"), [
    ("batchsize", "1000", "one COPY"), ("isolationLevel", "SERIALIZABLE", "'guarantee'"),
    ("truncate", "true", "appends"), ("numPartitions", "8", "repartition"),
    ("queryTimeout", "30", "'socketTimeout'"),
    ("createTableColumnTypes", "n INT", "create the table yourself"),
    ("fetchsize", "100", "Spark's jdbc reader"),
    ("driver", "com.mysql.cj.jdbc.Driver", "org.postgresql.Driver"),
])
def test_sparks_jdbc_options_are_refused_by_name_with_what_to_do(option, value, instead):
    """format("jdbc") → format("jetjdbc"): a Spark JDBC option jetjdbc does not take fails at start
    naming it and what to use instead (not as an unknown option)."""
    with pytest.raises(OptionError) as err:
        JdbcSinkOptions.parse({"url": "jdbc:postgresql://h/db", "dbtable": "t", option: value})
    assert err.value.option == option and instead in str(err.value)


def test_pgjdbcs_driver_class_is_accepted():
    opts = JdbcSinkOptions.parse({"url": "jdbc:postgresql://h/db", "dbtable": "t",
                                  "driver": "org.postgresql.Driver"})
    assert opts.table == TableName(schema=None, name="t")
