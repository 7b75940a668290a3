"""``jetspark inspect``'s credentials: from the environment, a file or libpq's own sources, never
from the command line alone (other local users read it in ``/proc``, and it stays in the shell's
history), and never shown.

- PostgreSQL: ``--pg-password-file FILE``, else ``JETSPARK_PG_PASSWORD``, else whatever the
  URL carries, else libpq's own ``PGPASSWORD`` and password file (``~/.pgpass`` or
  ``PGPASSFILE``), which libpq reads when no password is given;
- RabbitMQ: ``--amqp-password-file FILE``, else ``JETSPARK_AMQP_PASSWORD``, else the URL's;
  the management API's URL without a password gets the same one;
- Kafka: ``--kafka-config FILE``, librdkafka settings as ``key=value`` lines (``#`` and ``!``
  start comments), e.g. ``security.protocol``, ``sasl.mechanism``, ``sasl.username``,
  ``sasl.password``, ``ssl.ca.location``; ``bootstrap.servers`` there stands for ``--kafka``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from jetspark.errors import JetsparkError

PG_PASSWORD_ENV = "JETSPARK_PG_PASSWORD"
AMQP_PASSWORD_ENV = "JETSPARK_AMQP_PASSWORD"

_PASSWORD_IN_URL = re.compile(r"^[a-z][a-z0-9+.-]*://[^/@]*:[^/@]*@", re.I)
_PASSWORD_KV = re.compile(r"(^|\s)password\s*=", re.I)


class CredentialError(JetsparkError):
    """A credential file cannot be read or is malformed (the message never holds its content)."""


@dataclass(frozen=True)
class Credentials:
    """Passwords and Kafka settings for the services inspect asks; hidden from repr."""

    pg_password: str | None = field(default=None, repr=False)
    amqp_password: str | None = field(default=None, repr=False)
    kafka_config: Mapping[str, str] = field(default_factory=dict, repr=False)

    def secrets(self) -> tuple[str, ...]:
        """Every value that must not be shown (every Kafka setting but ``bootstrap.servers``
        counts: any may be a secret, a misspelled key's too)."""
        kafka = [v for k, v in self.kafka_config.items() if k != "bootstrap.servers"]
        values = [self.pg_password, self.amqp_password, *kafka]
        return tuple(v for v in values if v)


def _read(path: str, option: str) -> str:
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError:
        raise CredentialError(f"{option} {path}: not a text file") from None
    except OSError as e:
        raise CredentialError(f"{option} {path}: cannot be read ({e.strerror or type(e).__name__})") from None


def password_from_file(path: str, option: str) -> str:
    """The first line of ``path`` (without its line break): a password file's content."""
    lines = _read(path, option).splitlines()
    if not lines or not lines[0]:
        raise CredentialError(f"{option} {path}: the first line is empty; it must hold the password")
    return lines[0]


def kafka_config_from_file(path: str, option: str = "--kafka-config") -> dict[str, str]:
    """librdkafka settings from a properties file: ``key=value`` lines, blank and comment lines skipped."""
    config: dict[str, str] = {}
    for number, line in enumerate(_read(path, option).splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith(("#", "!")):
            continue
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise CredentialError(f"{option} {path}, line {number}: not a key=value setting")
        config[key.strip()] = value.strip()
    return config


def url_has_password(url: str) -> bool:
    """Whether a service URL (or libpq key=value string) carries a password."""
    return bool(_PASSWORD_IN_URL.match(url.removeprefix("jdbc:")) or _PASSWORD_KV.search(url))


def load(*, pg_password_file: str | None = None, amqp_password_file: str | None = None,
         kafka_config_file: str | None = None,
         environ: Mapping[str, str] | None = None) -> Credentials:
    """The credentials from the given files and the environment (files first)."""
    env = os.environ if environ is None else environ
    pg = (password_from_file(pg_password_file, "--pg-password-file") if pg_password_file
          else env.get(PG_PASSWORD_ENV) or None)
    amqp = (password_from_file(amqp_password_file, "--amqp-password-file") if amqp_password_file
            else env.get(AMQP_PASSWORD_ENV) or None)
    kafka = kafka_config_from_file(kafka_config_file) if kafka_config_file else {}
    return Credentials(pg, amqp, kafka)
