"""The shell lines ``jetspark services up`` and ``env`` print, and how a service's endpoint is
shown: never with its password. A URL whose password a local service keeps in a file beside
its data (RabbitMQ's ``amqp-password``, the Schema Registry's ``registry-password``) is
printed with ``$(cat <file>)`` (the path shell-quoted) in its place, so
``eval "$(jetspark services env)"`` reads it from the file, and the printed text holds none::

  export JETSPARK_AMQP_URL="amqp://jetspark:$(cat /tmp/jetspark-1/rabbitmq/amqp-password)@127.0.0.1:5672/%2F"

Every other value is single-quoted (``export VAR='value'``, a ``'`` in it as ``'"'"'``).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

from jetspark.devtools.services.endpoints import ENV_VARS
from jetspark.devtools.services.registry import ServiceRecord
from jetspark.redaction import redact_dsn

PASSWORD_FILES = {"rabbitmq": "amqp-password", "registry": "registry-password"}
"""The file beside a service's data that holds its URL's password."""


def export_lines(records: Mapping[str, ServiceRecord]) -> list[str]:
    """One ``export`` line per service, in the order of :data:`ENV_VARS`."""
    return [export_line(name, records[name]) for name in ENV_VARS if name in records]


def export_line(name: str, record: ServiceRecord) -> str:
    """``export VAR=...`` for ``record``'s endpoint; a password only as a read of its file (a
    service whose password is in no file: a comment saying so, never the password)."""
    var, endpoint = ENV_VARS[name], record.endpoint
    parts = _userinfo_password(endpoint)
    if parts is None:
        return f"export {var}={_single_quoted(endpoint)}"
    head, password, tail = parts
    path = Path(record.data_dir) / PASSWORD_FILES.get(name, "")
    kept = _file_text(path) if name in PASSWORD_FILES else None
    if kept is None or quote(kept, safe="") != password:
        return f"# {var} not printed: its password is kept in no file ({redact_dsn(endpoint)})"
    return f'export {var}="{_in_double_quotes(head)}$(cat {shlex.quote(str(path))}){_in_double_quotes(tail)}"'


def shown(endpoint: str) -> str:
    """An endpoint as a status line shows it: passwords masked."""
    return redact_dsn(endpoint)


def _userinfo_password(url: str) -> tuple[str, str, str] | None:
    """A URL cut around its userinfo's password (as written: percent-encoded), or None."""
    scheme_end = url.find("://")
    if scheme_end < 0:
        return None
    start = scheme_end + 3
    end = min((i for i in (url.find(c, start) for c in "/?#") if i >= 0), default=len(url))
    at = url.rfind("@", start, end)
    colon = url.find(":", start, at) if at >= 0 else -1
    if colon < 0:
        return None
    return url[:colon + 1], url[colon + 1:at], url[at:]


def _file_text(path: Path) -> str | None:
    """A password file's text as the service reads it (stripped), or None."""
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as f:
            return f.read().decode().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _single_quoted(text: str) -> str:
    """``text`` in a shell's single quotes (as earlier versions printed every line)."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _in_double_quotes(text: str) -> str:
    """``text`` as it reads literally inside a shell's double quotes."""
    return "".join("\\" + c if c in '\\"$`' else c for c in text)
