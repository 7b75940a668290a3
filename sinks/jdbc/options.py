"""Options of the ``jetjdbc`` sink, parsed once into a frozen, validated dataclass.

Option names follow Spark's JDBC data source where they overlap (``url``, ``dbtable``,
``user``, ``password``), so ``format("jdbc")`` → ``format("jetjdbc")`` works for them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from jetspark.errors import OptionError
from jetspark.options import SPARK_WRITER_OPTIONS, Options
from jetspark.redaction import REDACTED, mask_userinfo, redact_dsn, scrub, secret_values
from jetspark.sinks.guarantees import (
    NONE,
    TASK,
    TWO_PHASE,
    UPSERT,
    Commit,
    Guarantee,
    OnRejected,
    SinkCommits,
    parse_guarantee,
    parse_on_rejected,
    suffixed,
)
from jetspark.sinks.jdbc.spark_options import check_spark_options
from jetspark.sinks.transactional import SINK_ID_ACCEPTED, SINK_ID_RE

#: ``two-phase`` and ``task``: PostgresResource (resource.py) with or without PREPARE TRANSACTION;
#: ``upsert`` and ``none``: COPY-staged INSERT … ON CONFLICT and plain COPY (plain.py).
COMMITS = SinkCommits(
    "jetjdbc", (TWO_PHASE, TASK, UPSERT, NONE),
    old_modes={"exactly-once": TWO_PHASE, "transactional": TASK, "idempotent": UPSERT, "at-least-once": NONE},
    needs={UPSERT: "and option 'keys'"})

DEFAULT_MARKER_TABLE = "jetspark_sink_markers"
DEAD_LETTER_SUFFIX = "_rejected"
KNOWN = ("url", "table", "dbtable", "user", "password", "guarantee", "commit", "keys", "finalColumn",
         "sinkId", "createTable", "markerTable", "onRejected", "deadLetterTable", "connectTimeout",
         "socketTimeout", "trustTableOwner", "driver", *SPARK_WRITER_OPTIONS)
MAX_IDENTIFIER_BYTES = 63  # PostgreSQL's NAMEDATALEN - 1: longer names are truncated

_IDENT = r'(?:"(?:[^"]|"")+"|[^".\s]+)'
_QUALIFIED_RE = re.compile(rf"^\s*({_IDENT})(?:\s*\.\s*({_IDENT}))?\s*$")
DEFAULT_CONNECT_TIMEOUT_MS = 30_000
DEFAULT_SOCKET_TIMEOUT_MS = 300_000
TIMEOUT_BARE = "PgJDBC reads it as seconds, jetspark's other durations as milliseconds"
TABLE_ACCEPTED = 'a table name: "table" or "schema.table"; double-quote names containing dots or quotes'


@dataclass(frozen=True)
class TableName:
    """A possibly schema-qualified table name, unquoted (quoting happens with psycopg.sql)."""

    schema: str | None
    name: str

    def parts(self) -> tuple[str, ...]:
        return (self.schema, self.name) if self.schema else (self.name,)

    def __str__(self) -> str:
        return ".".join(self.parts())

    @classmethod
    def parse(cls, text: str, option: str) -> TableName:
        m = _QUALIFIED_RE.match(text)
        if not m:
            raise OptionError(option, text, TABLE_ACCEPTED)
        first, second = (_unquote(g) if g else None for g in m.groups())
        return cls(first, second) if second is not None else cls(None, first)

    def sibling(self, name: str) -> TableName:
        """A table of the same schema."""
        return TableName(self.schema, name)

    def with_suffix(self, suffix: str) -> TableName:
        """``<name><suffix>`` in the same schema, shortened with a hash past PostgreSQL's 63
        bytes (which would truncate it, perhaps into the table's own name)."""
        return self.sibling(suffixed(self.name, suffix, MAX_IDENTIFIER_BYTES))


def _unquote(ident: str) -> str:
    return ident[1:-1].replace('""', '"') if ident.startswith('"') else ident


def shown_conninfo(conninfo: str) -> str:
    """What a message may show of a URL or libpq ``key=value`` connection string: a URL's
    password masked up to its last ``@`` (unencoded spaces, quotes, ``@`` or ``/`` in it
    included), its user kept when it is plain, and secret parameters masked."""
    if "://" not in conninfo or "@" not in conninfo:
        return redact_dsn(conninfo)
    head, _, tail = conninfo.rpartition("@")
    scheme, _, userinfo = head.partition("://")
    user, colon, _ = userinfo.partition(":")
    if re.fullmatch(r"[\w.%+-]*", user):
        return redact_dsn(f"{scheme}://{user}{':' + REDACTED if colon else ''}@{tail}")
    return mask_userinfo(conninfo)


@dataclass(frozen=True)
class JdbcSinkOptions:
    """The validated configuration of one ``jetjdbc`` write. Its repr hides credentials."""

    conninfo: str = field(repr=False)
    user: str | None
    password: str | None = field(repr=False)
    table: TableName
    guarantee: Guarantee
    commit: Commit
    keys: tuple[str, ...]
    sink_id: str | None
    create_table: bool
    marker_table: TableName
    dead_letter_table: TableName
    on_rejected: OnRejected
    final_column: str | None = None
    connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS
    """How long a new session may take to connect (libpq's ``connect_timeout``, whole seconds)."""
    socket_timeout_ms: int = DEFAULT_SOCKET_TIMEOUT_MS
    """How long any one wait for the server may last (a statement's answer, a COPY chunk's
    send); 0: unbounded. After it the session is closed and the task fails naming it."""
    trust_table_owner: bool = True
    """A table owned by a role the sink's role is not (nor a member of) is written with a
    warning (True) or refused (False): its owner's triggers, defaults, CHECKs and policies run
    as the sink's role."""

    def qualified(self, table: TableName, marker: TableName, dead_letter: TableName) -> JdbcSinkOptions:
        """These options with the tables resolved to schema and name (see :mod:`.target`)."""
        return replace(self, table=table, marker_table=marker, dead_letter_table=dead_letter)

    @property
    def where(self) -> str:
        """The server, for messages: a URL's user and password as ``***`` (even unencoded, with
        spaces, quotes, ``@`` or ``/``), a libpq string's secret values likewise."""
        return shown_conninfo(self.conninfo)

    def secrets(self) -> tuple[str, ...]:
        """Literal secrets to scrub from any text we show (password option and in the URL)."""
        return secret_values({"url": self.conninfo, "password": self.password})

    def scrub(self, text: str) -> str:
        """``text`` without any credential of these options."""
        return redact_dsn(scrub(text, self.secrets()))

    def connect_kwargs(self) -> dict[str, str]:
        kwargs = {"connect_timeout": str(max(2, -(-self.connect_timeout_ms // 1000)))}  # libpq: >= 2 s
        if self.user:
            kwargs["user"] = self.user
        if self.password:
            kwargs["password"] = self.password
        return kwargs

    @classmethod
    def parse(cls, raw: Mapping[str, str]) -> JdbcSinkOptions:
        opts = Options(raw)
        guarantee, commit = parse_guarantee(opts, COMMITS)  # first: it names the old option 'mode'
        check_spark_options(opts)  # Spark's jdbc options by name, with what to do instead
        opts.reject_unknown(KNOWN)
        url = opts.string("url", required=True)
        assert url is not None
        if url.startswith("jdbc:"):
            url = url[len("jdbc:"):]
        if "://" in url and not url.startswith(("postgresql://", "postgres://")):
            raise OptionError("url", shown_conninfo(url),
                              "a PostgreSQL URL (jdbc:postgresql://…, postgresql://…) or libpq key=value")
        table_text = opts.string("table") or opts.string("dbtable")
        if table_text is None:
            raise OptionError("table", None, TABLE_ACCEPTED + " (option 'table' or 'dbtable')")
        table = TableName.parse(table_text, "table")
        keys_text = opts.string("keys")
        keys = tuple(k.strip() for k in keys_text.split(",")) if keys_text else ()
        if any(not k for k in keys):
            raise OptionError("keys", keys_text, "comma-separated column names")
        if commit == UPSERT and not keys:
            raise OptionError("keys", keys_text,
                              "the key columns of the upsert (required with commit=upsert)")
        final_column = opts.string("finalColumn")
        if final_column is not None:
            final_column = final_column.strip()
            if commit != UPSERT or not final_column or final_column in keys:
                raise OptionError("finalColumn", final_column,
                                  "the name of a boolean column that is not a key, with commit=upsert: "
                                  "a stored row whose value is true is never updated again")
        sink_id = opts.string("sinkId")
        if sink_id is not None and not SINK_ID_RE.match(sink_id):
            raise OptionError("sinkId", sink_id, SINK_ID_ACCEPTED)
        marker = opts.string("markerTable")
        marker_table = (TableName.parse(marker, "markerTable") if marker
                        else table.sibling(DEFAULT_MARKER_TABLE))
        dead_letter = opts.string("deadLetterTable")
        dead_letter_table = (TableName.parse(dead_letter, "deadLetterTable") if dead_letter
                             else table.with_suffix(DEAD_LETTER_SUFFIX))
        if dead_letter_table in (table, marker_table):
            raise OptionError("deadLetterTable", str(dead_letter_table),
                              "a table other than the sink's table and its marker table (markerTable)")
        return cls(
            conninfo=url,
            user=opts.string("user"),
            password=opts.string("password"),
            table=table,
            guarantee=guarantee,
            commit=commit,
            keys=keys,
            sink_id=sink_id,
            create_table=opts.boolean("createTable", False),
            marker_table=marker_table,
            dead_letter_table=dead_letter_table,
            on_rejected=parse_on_rejected(opts),
            final_column=final_column,
            connect_timeout_ms=_timeout_ms(opts, "connectTimeout", DEFAULT_CONNECT_TIMEOUT_MS, zero=False),
            socket_timeout_ms=_timeout_ms(opts, "socketTimeout", DEFAULT_SOCKET_TIMEOUT_MS, zero=True),
            trust_table_owner=opts.boolean("trustTableOwner", True),
        )


def _timeout_ms(opts: Options, name: str, default: int, *, zero: bool) -> int:
    """A timeout with its unit; ``zero``: 0 means none."""
    return opts.duration_with_unit_ms(name, default, bare=TIMEOUT_BARE, zero=zero)
