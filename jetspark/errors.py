"""The one root exception type of jetspark and its direct subclasses."""

from __future__ import annotations

from jetspark.redaction import REDACTED, shown_value

UNKNOWN_NOT_SHOWN = object()
"""The value of an option jetspark does not know: never shown (it may be a misspelt credential)."""


class JetsparkError(Exception):
    """Root of every error jetspark raises on purpose."""


class OptionError(JetsparkError, ValueError):
    """An option is unknown, missing or malformed.

    The message names the option, the value given and what is accepted. The value is
    shown as :func:`jetspark.redaction.shown_value` allows (``***`` for a credential, no
    value for an unknown option); the exception keeps only that shown form.
    """

    def __init__(self, option: str, value: object, accepted: str) -> None:
        self.option = option
        self.accepted = accepted
        if value is UNKNOWN_NOT_SHOWN:
            self.value: object = REDACTED
            got = "a value (not shown: an unknown option may be a misspelt credential)"
        else:
            self.value = shown_value(option, value)
            got = repr(self.value)
        super().__init__(f"option {option!r}: got {got}; accepted: {accepted}")


class ServiceError(JetsparkError, RuntimeError):
    """A backing service (Kafka, PostgreSQL, RabbitMQ) could not be started or reached."""


class SparkConnectError(JetsparkError, RuntimeError):
    """Something jetspark needs is not available over Spark Connect; the message says why and
    what to do instead (README, "Spark Connect")."""
