"""TLS for a local server started for tests: its certificate, key and the CA of its clients."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ServerTls:
    """PEM files: the server's certificate chain and key, and the CA client certificates are
    verified against."""

    ca: Path
    certificate: Path
    key: Path
