"""Credentials never appear in logs, offsets, exceptions or commit messages: the helpers."""

from __future__ import annotations

import re
from collections.abc import Iterable

_PASSWORD_IN_URL = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@]*):[^@/]*@", re.I)
_PASSWORD_KV = re.compile(r"(password\s*=\s*)('[^']*'|\S+)", re.I)


def redact_dsn(dsn: str) -> str:
    """``dsn`` with any password replaced by ``***`` (URL or key=value form)."""
    dsn = _PASSWORD_IN_URL.sub(lambda m: f"{m['scheme']}{m['user']}:***@", dsn)
    return _PASSWORD_KV.sub(lambda m: f"{m.group(1)}***", dsn)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every one of ``secrets`` replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text
