"""What both sources do with a record whose event time is malformed: the words of
``eventTime.onMalformed`` and the error of ``fail`` (docs/design.md, "Watermarks")."""

from __future__ import annotations

from jetspark.errors import JetsparkError

#: ``fail`` the read, naming the record; ``null``: the record stays, without that event time.
ON_MALFORMED = ("fail", "null")


class MalformedEventTimeError(JetsparkError):
    """A record's event time is missing or malformed and ``eventTime.onMalformed=fail``."""
