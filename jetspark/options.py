"""Parsing of data source options into typed values, with errors that name the option.

Spark hands options over as strings in a case-insensitive map. Each format parses them
ONCE into a frozen dataclass (see the formats' ``*Options.parse``); the helpers here do
the per-value work and raise :class:`~jetspark.errors.OptionError` naming the option, the
value given and what is accepted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from jetspark.errors import UNKNOWN_NOT_SHOWN, OptionError
from jetspark.secret_references import SecretReference, split_secret_references

_DURATION_UNITS_MS = {
    "ms": 1,
    "milli": 1,
    "millis": 1,
    "millisecond": 1,
    "milliseconds": 1,
    "s": 1_000,
    "sec": 1_000,
    "secs": 1_000,
    "second": 1_000,
    "seconds": 1_000,
    "m": 60_000,
    "min": 60_000,
    "mins": 60_000,
    "minute": 60_000,
    "minutes": 60_000,
    "h": 3_600_000,
    "hour": 3_600_000,
    "hours": 3_600_000,
    "d": 86_400_000,
    "day": 86_400_000,
    "days": 86_400_000,
}
_DURATION_RE = re.compile(r"^\s*(?:interval\s+)?(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
# Options Spark itself puts into a writer's options (from writeStream/DataFrameWriter calls).
SPARK_WRITER_OPTIONS = ("checkpointLocation", "path", "queryName")
DURATION_ACCEPTED = "a duration such as '10 seconds', '500ms', '2 minutes' or '1h' (>= 0)"


class Options:
    """Case-insensitive view of raw string options that remembers which ones were read.

    A credential given as ``X.file`` or ``X.env`` is seen as ``X``, read once when ``X`` is
    first used (:mod:`jetspark.secret_references`): a format refuses unknown options before
    it uses any, so no file is read for options that are refused."""

    def __init__(self, raw: Mapping[str, str] | None) -> None:
        plain, refs = split_secret_references(raw or {})
        self._raw: dict[str, tuple[str, object]] = {str(k).lower(): (k, v) for k, v in plain.items()}
        self._raw.update({base.lower(): (base, ref) for base, ref in refs.items()})
        self._used: set[str] = set()

    def _value(self, low: str) -> str:
        orig, value = self._raw[low]
        if isinstance(value, SecretReference):
            value = value.read()
            self._raw[low] = (orig, value)
        return str(value)

    def get(self, name: str) -> str | None:
        """The raw value of ``name`` (any case), or None when absent."""
        self._used.add(name.lower())
        return self._value(name.lower()) if name.lower() in self._raw else None

    def with_prefix(self, prefix: str) -> dict[str, str]:
        """All options starting with ``prefix`` (case-insensitive), prefix stripped.

        The remainder keeps its original spelling (librdkafka keys are case-sensitive).
        """
        p = prefix.lower()
        out = {}
        for low, (orig, _value) in list(self._raw.items()):
            if low.startswith(p):
                self._used.add(low)
                out[orig[len(prefix) :]] = self._value(low)
        return out

    def reject_unknown(self, known: Iterable[str], prefixes: Iterable[str] = ()) -> None:
        """Raise for any option that is neither in ``known`` nor under one of ``prefixes``
        (naming it, never showing its value)."""
        known_low = {k.lower() for k in known}
        prefix_low = tuple(p.lower() for p in prefixes)
        for low, (orig, _value) in sorted(self._raw.items()):
            if low in known_low or (prefix_low and low.startswith(prefix_low)):
                continue
            accepted = ", ".join(sorted(known)) + "".join(f", {p}*" for p in prefixes)
            raise OptionError(orig, UNKNOWN_NOT_SHOWN, f"one of the known options: {accepted}")

    def string(self, name: str, default: str | None = None, *, required: bool = False) -> str | None:
        value = self.get(name)
        if value is None or value == "":
            if required:
                raise OptionError(name, value, "a non-empty value (this option is required)")
            return default
        return value

    def boolean(self, name: str, default: bool) -> bool:
        value = self.get(name)
        if value is None:
            return default
        low = value.strip().lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no"):
            return False
        raise OptionError(name, value, "true or false")

    def integer(
        self, name: str, default: int | None, *, minimum: int | None = None, maximum: int | None = None
    ) -> int | None:
        value = self.get(name)
        if value is None or value.strip() == "":
            return default
        if minimum is not None and maximum is not None:
            accepted = f"an integer from {minimum} to {maximum}"
        else:
            accepted = "an integer" + (f" >= {minimum}" if minimum is not None else "") + (
                f" <= {maximum}" if maximum is not None else "")
        try:
            parsed = int(value.strip())
        except ValueError:
            raise OptionError(name, value, accepted) from None
        if (minimum is not None and parsed < minimum) or (maximum is not None and parsed > maximum):
            raise OptionError(name, value, accepted)
        return parsed

    def duration_ms(self, name: str, default: int | None) -> int | None:
        value = self.get(name)
        if value is None or value.strip() == "":
            return default
        return parse_duration_ms(value, option=name)

    def duration_with_unit_ms(self, name: str, default: int, *, bare: str, zero: bool = False) -> int:
        """A duration that must carry its unit (a bare number is refused, ``bare`` saying why:
        what another client would read it as); ``zero``: 0 is allowed (it means none)."""
        value = self.string(name)
        accepted = (f"a duration with its unit, such as '30 seconds' or '5 minutes' (a bare number "
                    f"is refused: {bare})")
        if value is not None and re.fullmatch(r"\s*\d+(\.\d*)?\s*", value):
            raise OptionError(name, value, accepted)
        ms = self.duration_ms(name, default)
        assert ms is not None
        if ms == 0 and not zero:
            raise OptionError(name, value, accepted + ", above 0")
        return ms

    def size_bytes(self, name: str, default: int) -> int:
        """A size: ``32 MB``, ``64MiB``, ``1g`` or a plain number of bytes."""
        value = self.get(name)
        if value is None or value.strip() == "":
            return default
        m = _SIZE_RE.match(value)
        unit = m.group(2).lower() if m else None
        if not m or unit not in _SIZE_UNITS:
            raise OptionError(name, value, SIZE_ACCEPTED)
        return round(float(m.group(1)) * _SIZE_UNITS[unit])

    def choice(self, name: str, default: str, choices: Iterable[str]) -> str:
        allowed = list(choices)
        value = self.get(name)
        if value is None or value.strip() == "":
            return default
        low = value.strip().lower()
        for c in allowed:
            if c.lower() == low:
                return c
        raise OptionError(name, value, "one of " + " | ".join(allowed))


SIZE_ACCEPTED = "a size such as '32 MB', '64MiB', '1 GB' or a number of bytes"
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
               "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}


def parse_duration_ms(value: str, *, option: str = "duration") -> int:
    """Parse '10 seconds', '500ms', '2m', '1.5 hours' or a plain number of ms into ms."""
    m = _DURATION_RE.match(str(value))
    if not m:
        raise OptionError(option, value, DURATION_ACCEPTED)
    number, unit = float(m.group(1)), m.group(2).lower()
    if unit == "":
        factor = 1
    elif unit in _DURATION_UNITS_MS:
        factor = _DURATION_UNITS_MS[unit]
    else:
        raise OptionError(option, value, DURATION_ACCEPTED)
    return round(number * factor)
