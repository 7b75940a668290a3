"""The one root exception type of jetspark and its direct subclasses."""

from __future__ import annotations


class JetsparkError(Exception):
    """Root of every error jetspark raises on purpose."""


class OptionError(JetsparkError, ValueError):
    """An option is unknown, missing or malformed.

    The message always names the option, the value given and what is accepted.
    """

    def __init__(self, option: str, value: object, accepted: str) -> None:
        self.option = option
        self.value = value
        self.accepted = accepted
        super().__init__(f"option {option!r}: got {value!r}; accepted: {accepted}")


class ServiceError(JetsparkError, RuntimeError):
    """A backing service (Kafka, PostgreSQL, RabbitMQ) could not be started or reached."""
