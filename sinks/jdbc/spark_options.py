"""Spark's JDBC data source options that jetjdbc does not take under their name, each with
what to do instead: ``format("jdbc")`` → ``format("jetjdbc")`` fails at start naming the
option, never runs without what it asked for (docs/how-to/migrate-from-kafka.md, "The sink").

``url``, ``dbtable``, ``user`` and ``password`` are jetjdbc's too; ``driver`` is accepted when it
is PgJDBC's (jetjdbc talks to PostgreSQL through libpq, whatever the driver class)."""

from __future__ import annotations

from jetspark.errors import OptionError
from jetspark.options import Options

POSTGRES_DRIVER = "org.postgresql.Driver"

_READ_ONLY = "nothing: it is an option of Spark's jdbc reader, and jetjdbc only writes"
REFUSED: dict[str, str] = {
    "batchsize": "nothing: jetjdbc copies each task's rows with one COPY, not in INSERT batches",
    "isolationLevel": "nothing: option 'guarantee' (and 'commit') decides jetjdbc's transactions",
    "truncate": "nothing: jetjdbc appends (or upserts with commit=upsert); empty the table yourself",
    "cascadeTruncate": "nothing: jetjdbc appends (or upserts with commit=upsert); empty the table yourself",
    "createTableOptions": "nothing: createTable=true creates a plain table; create it yourself for more",
    "createTableColumnTypes": "nothing: createTable=true types columns from the DataFrame; create the "
                              "table yourself for other types (jetjdbc writes into it when they fit)",
    "numPartitions": "nothing: each task of the DataFrame writes on one connection; repartition it "
                     "(df.repartition(n)) for fewer or more",
    "queryTimeout": "option 'socketTimeout' (how long a statement may wait for the server)",
    "sessionInitStatement": "nothing: give session settings in the url (options=-c name=value)",
    "prepareQuery": _READ_ONLY,
    "keytab": "nothing: give libpq's Kerberos settings in the url (krbsrvname, gsslib)",
    "principal": "nothing: give libpq's Kerberos settings in the url (krbsrvname, gsslib)",
    "refreshKrbConfig": "nothing: give libpq's Kerberos settings in the url (krbsrvname, gsslib)",
    "connectionProvider": "nothing: jetjdbc connects through libpq",
    "query": _READ_ONLY, "fetchsize": _READ_ONLY, "partitionColumn": _READ_ONLY,
    "lowerBound": _READ_ONLY, "upperBound": _READ_ONLY, "customSchema": _READ_ONLY,
    "pushDownPredicate": _READ_ONLY, "pushDownAggregate": _READ_ONLY, "pushDownLimit": _READ_ONLY,
    "pushDownOffset": _READ_ONLY, "pushDownTableSample": _READ_ONLY,
}
"""Spark's JDBC options jetjdbc refuses, with what to use instead."""


def check_spark_options(opts: Options) -> None:
    """Raise an :class:`OptionError` naming the first Spark JDBC option jetjdbc does not take
    (its value is shown: none of them holds a credential), and for a ``driver`` other than
    PgJDBC's."""
    driver = opts.get("driver")
    if driver is not None and driver.strip() != POSTGRES_DRIVER:
        raise OptionError("driver", driver, f"{POSTGRES_DRIVER!r} or nothing: jetjdbc writes to PostgreSQL "
                          "through libpq")
    for name, instead in REFUSED.items():
        value = opts.get(name)
        if value is not None:
            raise OptionError(name, value, f"{instead} (a Spark jdbc option jetjdbc does not take)")
