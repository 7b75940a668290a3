"""Folders on any filesystem pyarrow opens: local paths and URIs (``s3://``, ``gs://``,
``hdfs://``, ``abfs://``, ``file://``).

jetrabbitmq's ``walLocation`` is opened here, and ``jetspark inspect`` reads a query's
``checkpointLocation`` and ``walLocation`` here. Hadoop's S3 schemes that Spark's
checkpoints use (``s3a://``, ``s3n://``) name the same objects as ``s3://`` and are opened as
such. Credentials come from the filesystem's own sources (the environment, the instance's
role, a URI's user info or parameters); no message shows them.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.fs as pafs

from jetspark.errors import OptionError
from jetspark.redaction import is_secret_option, redact_dsn, scrub, secret_values

HADOOP_S3_SCHEMES = ("s3a", "s3n")


def _without_secret_tail(location: str) -> tuple[str, bool]:
    """``location`` with its query cut after the first secret-named parameter's name, and
    whether anything followed that parameter (the tail of a value split by an unencoded ``&``
    would otherwise pass for a parameter of its own, shown by name)."""
    head, sep, query = location.partition("?")
    pieces = query.split("&") if sep else []
    for i, piece in enumerate(pieces):
        if is_secret_option(piece.partition("=")[0]):
            kept = [*pieces[:i], f"{piece.partition('=')[0]}=***"]
            return f"{head}?{'&'.join(kept)}", i + 1 < len(pieces)
    return location, False


def open_location(location: str, option: str = "walLocation") -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem and root path for ``location``, the value of ``option``: a local path
    or a URI. Raises :class:`OptionError` naming ``option`` (its value shown without credentials)
    when pyarrow cannot open it."""
    if "://" not in location:
        return pafs.LocalFileSystem(), os.path.abspath(location)
    scheme, rest = location.split("://", 1)
    scheme = scheme.lower()  # schemes are case-insensitive (RFC 3986)
    if scheme == "file" and rest.startswith("localhost/"):
        rest = rest[len("localhost"):]
    uri = f"{'s3' if scheme in HADOOP_S3_SCHEMES else scheme}://{rest}"
    try:
        fs, path = pafs.FileSystem.from_uri(uri)
    except (pa.ArrowException, ValueError, OSError) as e:  # its text quotes the URI, keys and all
        shown, cut = _without_secret_tail(location)
        if cut:  # an unencoded & in a secret: its tail looks like a parameter, and pyarrow names it
            reason = ("percent-encode &, =, ? and # in a secret parameter's value, e.g. %26 for &; "
                      "everything after the secret parameter is hidden here")
        else:
            reason = redact_dsn(scrub(str(e), secret_values({option: location})))
        raise OptionError(option, shown,
                          f"a local path or a URI of a filesystem pyarrow opens, such as s3://, "
                          f"s3a://, gs://, hdfs://, abfs:// or file:// ({reason})") from None
    return fs, path.rstrip("/") or "/"
