"""PostgreSQL helpers of the jetjdbc sink tests: table contents, prepared transactions, and a
private server (for settings and restarts the shared server must not see)."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql

from jetspark.devtools.services import postgres
from jetspark.devtools.services.process import stop
from jetspark.devtools.services.registry import ServiceRecord


def id_counts(dsn: str, schema: str, table: str) -> Counter:
    """How many times each id is in the table."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(sql.SQL("SELECT id FROM {}").format(sql.Identifier(schema, table))).fetchall()
    return Counter(r[0] for r in rows)


def dead_letters(dsn: str, schema: str, table: str = "events_rejected") -> list[tuple]:
    """(id, sqlstate, batch_id, partition_id, name) of each row of a dead-letter table, by id;
    none when the table does not exist."""
    with psycopg.connect(dsn) as conn:
        if conn.execute("SELECT to_regclass(%s)", (f'"{schema}"."{table}"',)).fetchone()[0] is None:
            return []
        rows = conn.execute(sql.SQL("SELECT row_json, sqlstate, batch_id, partition_id FROM {}").format(
            sql.Identifier(schema, table))).fetchall()
    return sorted((json.loads(j)["id"], state, b, p, json.loads(j)["name"]) for j, state, b, p in rows)


def dead_letter_ids(dsn: str, schema: str, table: str = "events_rejected") -> Counter:
    """How many times each id is in the dead-letter table."""
    return Counter(row[0] for row in dead_letters(dsn, schema, table))


def markers(dsn: str, schema: str) -> list[tuple]:
    """(sink_id, batch_id, partition_id, attempt, row_count) of the schema's marker table."""
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql.SQL(
            "SELECT sink_id, batch_id, partition_id, attempt, row_count FROM {} ORDER BY 2, 3").format(
            sql.Identifier(schema, "jetspark_sink_markers"))).fetchall()


def prepared_in_schema(dsn: str, schema: str) -> list[str]:
    """Gids of prepared transactions holding locks on relations of ``schema``."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            """SELECT DISTINCT p.gid FROM pg_prepared_xacts p
               JOIN pg_locks x ON x.locktype = 'transactionid' AND x.transactionid = p.transaction
                              AND x.pid IS NULL
               JOIN pg_locks l ON l.virtualtransaction = x.virtualtransaction AND l.pid IS NULL
                              AND l.locktype = 'relation'
               JOIN pg_class c ON c.oid = l.relation
               JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = %s ORDER BY 1""", (schema,)).fetchall()
    return [g for (g,) in rows]


def prepared_with_prefix(dsn: str, prefix: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT gid FROM pg_prepared_xacts WHERE starts_with(gid, %s) ORDER BY 1",
                            (prefix,)).fetchall()
    return [g for (g,) in rows]


def rollback_prepared_in_schema(dsn: str, schema: str) -> list[str]:
    """Safety net for teardown: a pending prepared transaction would block DROP SCHEMA."""
    gids = prepared_in_schema(dsn, schema)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for gid in gids:
            with contextlib.suppress(psycopg.errors.UndefinedObject):
                conn.execute(sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(gid)))
    return gids


@dataclass
class PrivateServer:
    """A PostgreSQL server of our own in ``data_dir`` (Debian's binaries, like the local service)."""

    data_dir: Path
    record: ServiceRecord | None = None
    ports: dict[str, int] = field(default_factory=dict)

    @property
    def dsn(self) -> str:
        assert self.record is not None, "server not started"
        return self.record.endpoint

    def start(self, max_prepared_transactions: int = 16) -> None:
        old_setting, old_probe = postgres.MAX_PREPARED_TRANSACTIONS, postgres.probe
        postgres.MAX_PREPARED_TRANSACTIONS = max_prepared_transactions
        postgres.probe = _plain_probe  # the service probe insists on prepared transactions
        try:
            self.record = postgres.start(self.data_dir, self.ports or None)
        finally:
            postgres.MAX_PREPARED_TRANSACTIONS, postgres.probe = old_setting, old_probe
        self.ports = dict(self.record.ports)

    def stop(self) -> None:
        if self.record is not None:
            for proc in self.record.processes:
                stop(proc)
            self.record = None

    def restart(self, max_prepared_transactions: int = 16) -> None:
        self.stop()
        self.start(max_prepared_transactions)


def _plain_probe(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=3) as conn:
        conn.execute("SELECT 1")
