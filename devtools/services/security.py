"""What secures a local server started for tests: TLS files and a login."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ServerTls:
    """PEM files: the server's certificate chain and key, and the CA client certificates are
    verified against."""

    ca: Path
    certificate: Path
    key: Path


@dataclass(frozen=True)
class Login:
    """A user and password the server is started with (instead of its open default)."""

    user: str
    password: str = field(repr=False)
