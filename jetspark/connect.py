"""What differs over Spark Connect: telling a Connect session apart, and making sure the
server knows a jetspark format (docs/how-to/spark-connect.md; docs/design.md, "Spark Connect").

Over Connect the formats run on the server: its Python workers import jetspark from the
server's Python environment, where PySpark's auto-registration finds them. The client holds
no JVM, so nothing that reaches for one (``sparkContext``, ``_jsparkSession``, py4j) works.
"""

from __future__ import annotations

from jetspark.errors import SparkConnectError

NOT_FOUND = "DATA_SOURCE_NOT_FOUND"


def is_connect(spark) -> bool:
    """True for a Spark Connect session (``SparkSession.builder.remote(...)``)."""
    return type(spark).__module__.startswith("pyspark.sql.connect.")


def not_installed_on_server(name: str) -> SparkConnectError:
    return SparkConnectError(
        f"the Spark Connect server cannot run the format {name!r}: jetspark is not installed where "
        "the server runs its Python workers. Install jetspark into that Python environment (the "
        "server's spark.pyspark.python or PYSPARK_PYTHON; on a managed platform, its library or "
        "cluster environment) and restart the server. Registering the format from the client "
        "cannot ship it: the server imports jetspark to run it (docs/how-to/spark-connect.md)."
    )


def _condition(error: BaseException) -> str | None:
    get = getattr(error, "getCondition", None) or getattr(error, "getErrorClass", None)
    try:
        return get() if get is not None else None
    except Exception:
        return None


def resolved_on_server(spark, source: type, load):
    """``load()`` (a reader's ``load``, lazy over Connect) analysed by the server now.

    A server that does not know the format yet gets it registered from the client (the server
    then imports it from its own jetspark); one that cannot import jetspark at all raises
    :class:`SparkConnectError` here, at the call, rather than a worker's traceback at
    ``start()``.
    """
    df = load()
    try:
        df.schema  # noqa: B018 - one analysis round trip: the server resolves the format
        return df
    except Exception as e:
        if _condition(e) != NOT_FOUND:
            raise
    spark.dataSource.register(source)
    df = load()
    try:
        df.schema  # noqa: B018
    except Exception as e:
        raise not_installed_on_server(source.name()) from e
    return df
