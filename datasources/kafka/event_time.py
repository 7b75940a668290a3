"""Event time from a field of the record's JSON value (``eventTime.field``), vectorized.

By default jetkafka's event time is the Kafka record timestamp. With ``eventTime.field``
(a dotted path into a JSON object value, e.g. ``ts`` or ``meta.eventTime``) it is read
from the payload instead, in one pass per chunk: the values become newline-delimited JSON
(raw line breaks in a valid JSON value are white space, so they become spaces) parsed by
Arrow's JSON reader with a schema holding only the field. Only a chunk that Arrow rejects
(a value that is not a JSON object, a field of the wrong type) goes record by record, to
tell the good records from the bad ones.

``eventTime.format``: ``epochMillis`` (default; a JSON number), ``epochSeconds`` (a JSON
number, fractions allowed), both to the millisecond, or ``iso8601``: a JSON string
``YYYY-MM-DDTHH:MM:SS`` (``T`` or a space), an optional fraction of one or more digits
(kept to the microsecond, further digits truncated) and an optional zone: ``Z``, ``±HH:MM``,
``±HHMM`` or ``±HH`` (converted to UTC); without a zone the value is UTC. Anything else
(date only, no seconds, an impossible date or time such as February 30 or 24:00) is
malformed. Per chunk, the strings are checked with a regular expression and cast by Arrow
(after cutting fractions to six digits, and appending ``Z`` to the naive values of a chunk
that mixes naive and zoned ones: chunks that need neither skip those passes).

With typed values (``value.format`` avro or json-schema) the path names a field of the decoded
value instead (``EventTimeSpec.typed``), checked when the query is planned: a timestamp or date
field is the event time as it is (a timestamp without zone is taken as UTC; ``eventTime.format``
does not apply), a number is read by ``eventTime.format`` (``epochMillis``, ``epochSeconds``), a
string as ``iso8601``. A value that did not decode has no event time.

A record whose field is missing, null or malformed is handled by ``eventTime.onMalformed``:
``fail`` (default: the read fails naming topic, partition and offset) or ``null`` (the
row's ``eventTime`` is null and the record's Kafka timestamp stands in for watermarks, so a
bad record can neither stall nor jump the watermark; route such rows to a dead-letter sink
with ``where(col("eventTime").isNull() & ~col("heartbeat"))``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
from pyspark.sql import types as T

from jetspark.columns import TIMESTAMP_TYPE
from jetspark.datasources.malformed import (
    ON_MALFORMED,
    MalformedEventTimeError,
    beyond_cutoff,
    cutoff_text,
    valid_event_ms,
)
from jetspark.errors import OptionError
from jetspark.options import Options
from jetspark.schemas.json_values import ndjson

if TYPE_CHECKING:
    from jetspark.datasources.kafka.typed_values import TypedValues

FORMATS = ("epochMillis", "epochSeconds", "iso8601")
_EVENT_TIME_TYPES = (T.TimestampType, T.TimestampNTZType, T.DateType, T.ByteType, T.ShortType, T.IntegerType,
                     T.LongType, T.FloatType, T.DoubleType, T.DecimalType, T.StringType)
"""The Spark types a typed value's event-time field may have."""
_TS_US = TIMESTAMP_TYPE
_ISO_FORM = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}(?::?\d{2})?)?$"
"""The accepted ISO-8601 forms (see the module docstring) with at most six fraction digits;
Arrow's cast alone would also take a date only or minutes without seconds."""
_ISO_FORM_LONG = _ISO_FORM.replace(r"\d{1,6}", r"\d+")
_ISO_ZONE = r"(?:Z|[+-]\d{2}(?::?\d{2})?)$"
_READ = pj.ReadOptions(use_threads=False, block_size=1 << 26)


@dataclass(frozen=True)
class EventTimeSpec:
    """Where a record's event time is: a dotted path into its JSON value, and its format."""

    path: tuple[str, ...]
    format: str = "epochMillis"
    on_malformed: str = "fail"
    typed: TypedValues | None = None
    """The value column's decoder when values are typed: the path is then into the decoded value."""

    def on_typed(self, typed: TypedValues, option: str = "eventTime.field") -> EventTimeSpec:
        """This spec for the typed values ``typed``: its path must name a field of their reader
        schema holding a timestamp, date, number or string (an :class:`OptionError` otherwise)."""
        node: T.DataType = typed.spark
        for depth, key in enumerate(self.path):
            names = node.fieldNames() if isinstance(node, T.StructType) else []
            if key not in names:
                where = ".".join(self.path[:depth]) or "the value"
                has = ", ".join(names) or "no fields"
                raise OptionError(option, ".".join(self.path),
                                  f"a field of the value's reader schema ({where} has {has})")
            node = node[key].dataType
        if not isinstance(node, _EVENT_TIME_TYPES):
            raise OptionError(option, ".".join(self.path), "a field holding a timestamp, date, number or "
                              f"string (this one is {node.simpleString()})")
        return replace(self, typed=typed)

    @classmethod
    def parse(cls, opts: Options, *, future_cutoff: bool = False) -> EventTimeSpec | None:
        """``eventTime.*`` options; None when the event time is the Kafka timestamp.
        ``future_cutoff``: ``watermark.maxFutureSkew`` is set, so ``eventTime.onMalformed``
        also applies to Kafka timestamps."""
        raw = opts.string("eventTime.field", None)
        fmt = opts.choice("eventTime.format", "epochMillis", list(FORMATS))
        on_malformed = parse_on_malformed(opts)
        if raw is None:
            if opts.get("eventTime.format") is not None:
                raise OptionError("eventTime.format", opts.get("eventTime.format"),
                                  "nothing unless eventTime.field is set")
            if opts.get("eventTime.onMalformed") is not None and not future_cutoff:
                raise OptionError("eventTime.onMalformed", opts.get("eventTime.onMalformed"),
                                  "nothing unless eventTime.field or watermark.maxFutureSkew is set")
            return None
        path = tuple(raw.split("."))
        if not all(p.strip() for p in path):
            raise OptionError("eventTime.field", raw, "a dotted path of JSON object keys, e.g. ts or meta.ts")
        return cls(path, fmt, on_malformed)

    def _arrow_type(self) -> pa.DataType:
        leaf: pa.DataType = pa.string() if self.format == "iso8601" else pa.float64()
        for key in reversed(self.path[1:]):
            leaf = pa.struct([(key, leaf)])
        return leaf

    def _to_us(self, leaf: pa.Array) -> pa.Array:
        """Epoch µs (int64, nulls kept) from the parsed leaf values; a malformed ISO-8601 string
        becomes null, an impossible date raises (ArrowInvalid). A number that is no time (NaN,
        ±inf, beyond years 1-9999, e.g. 2**62 ms) becomes null: a malformed event time."""
        if self.format == "iso8601":
            return iso8601_to_us(leaf)
        scale = 1000.0 if self.format == "epochSeconds" else 1.0
        # unsafe: an integer beyond ±2**53 rounds, and is beyond year 9999 anyway (malformed)
        numbers = pc.cast(leaf, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        with np.errstate(over="ignore", invalid="ignore"):
            ms = np.floor(numbers * scale)
        valid = valid_event_ms(ms)
        return pa.array(np.where(valid, ms, 0.0).astype(np.int64) * 1000, pa.int64(), mask=~valid)


def parse_on_malformed(opts: Options) -> str:
    """``eventTime.onMalformed``: ``fail`` (default) or ``null``."""
    return opts.choice("eventTime.onMalformed", "fail", list(ON_MALFORMED))


def iso8601_to_us(text: pa.Array) -> pa.Array:
    """Epoch µs (int64) of ISO-8601 strings in the accepted forms; null for any other string.

    Raises ``ArrowInvalid`` when a string has the form but no such time exists (February 30,
    24:00, second 60): the caller then goes record by record. The common chunks (every
    value with a zone, or none; at most six fraction digits) take the fewest passes.
    """
    null = pa.scalar(None, pa.string())
    short = pc.match_substring_regex(text, _ISO_FORM)
    if pc.any(pc.invert(short)).as_py():  # malformed values, or fractions beyond microseconds
        text = pc.if_else(pc.match_substring_regex(text, _ISO_FORM_LONG), text, null)
        text = pc.replace_substring_regex(text, r"(\.\d{6})\d+", r"\1")
    zoned = pc.match_substring_regex(text, _ISO_ZONE)
    if pc.all(zoned).as_py():
        return pc.cast(pc.cast(text, _TS_US), pa.int64())
    if not pc.any(zoned).as_py():
        return pc.cast(pc.cast(text, pa.timestamp("us")), pa.int64())
    return pc.cast(pc.cast(pc.if_else(zoned, text, pc.binary_join_element_wise(text, "Z", "")), _TS_US),
                   pa.int64())


def extract_us(spec: EventTimeSpec, values: pa.Array) -> pa.Array:
    """The event time (epoch µs, int64; null where missing or malformed) of every value."""
    n = len(values)
    if n == 0:
        return pa.array([], pa.int64())
    if spec.typed is not None:
        return _typed_us(spec, values)
    try:
        return _vectorized(spec, values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, _Misaligned):
        return pa.array([_one(spec, v) for v in values.to_pylist()], pa.int64())


def extract_ms(spec: EventTimeSpec, values: pa.Array) -> pa.Array:
    """The event time in epoch ms (floored), as :func:`extract_us`."""
    us = extract_us(spec, values)
    ms = np.floor_divide(pc.fill_null(us, 0).to_numpy(zero_copy_only=False), 1000)
    return pa.array(ms, pa.int64(), mask=pc.is_null(us).to_numpy(zero_copy_only=False))


class _Misaligned(Exception):
    """Arrow's reader saw a different number of rows than values (blank lines)."""


def _vectorized(spec: EventTimeSpec, values: pa.Array) -> pa.Array:
    values = values.cast(pa.binary())
    blank = pc.equal(pc.binary_length(values), 0)
    objects = pc.if_else(pc.or_kleene(pc.is_null(values), blank), pa.scalar(b"{}"), values)
    text, _offsets = ndjson(objects)
    schema = pa.schema([(spec.path[0], spec._arrow_type())])
    parse = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    table = pj.read_json(pa.BufferReader(pa.py_buffer(text)), read_options=_READ, parse_options=parse)
    if table.num_rows != len(values):
        raise _Misaligned
    leaf = table.column(0).combine_chunks()
    for key in spec.path[1:]:
        leaf = pc.struct_field(leaf, key)
    return spec._to_us(leaf)


def _typed_us(spec: EventTimeSpec, values: pa.Array) -> pa.Array:
    """Event times from the decoded values' field (null where a value did not decode)."""
    leaf, _errors = spec.typed.decode_values(values, remember=True)
    for key in spec.path:
        leaf = pc.struct_field(leaf, key)
    t = leaf.type
    if pa.types.is_timestamp(t):
        return pc.cast(pc.cast(leaf, pa.timestamp("us", tz=t.tz)), pa.int64())
    if pa.types.is_date(t):
        return pc.multiply(pc.cast(pc.cast(leaf, pa.date32()), pa.int64()), 86_400_000_000)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        try:
            return iso8601_to_us(leaf)
        except pa.ArrowInvalid:  # a string of the form but no such time: one by one
            return pa.array([_iso8601_one(v) for v in leaf.to_pylist()], pa.int64())
    return spec._to_us(leaf)


def _iso8601_one(text: object) -> int | None:
    """Epoch µs of one ISO-8601 string; None when it is not a string of an accepted form, or
    names no such time."""
    if not isinstance(text, str):
        return None
    try:
        return iso8601_to_us(pa.array([text], pa.string())).to_pylist()[0]
    except pa.ArrowInvalid:
        return None


def _one(spec: EventTimeSpec, value: bytes | None) -> int | None:
    """The record-by-record path: None when the value or its field does not fit."""
    try:
        node = json.loads(value) if value else None
        for key in spec.path:
            node = node.get(key) if isinstance(node, dict) else None
        if spec.format == "iso8601":
            return _iso8601_one(node)
        if isinstance(node, bool) or not isinstance(node, int | float):
            return None
        return int(spec._to_us(pa.array([float(node)])).to_pylist()[0])
    except (ValueError, pa.ArrowInvalid, OverflowError, RecursionError):  # RecursionError: deep nesting
        return None


def event_times(spec: EventTimeSpec, values: pa.Array, fallback_ms: np.ndarray, *, topic: str, partition: int,
                offsets: np.ndarray, cutoff_ms: int | None = None) -> tuple[pa.Array, np.ndarray]:
    """(``eventTime`` column, event times in ms for watermarks) of one chunk of records.

    Where the field is missing or malformed, or later than ``cutoff_ms`` (the batch's cut-off,
    ``watermark.maxFutureSkew``): ``onMalformed=fail`` raises naming the first such record;
    ``null`` leaves the column null and uses ``fallback_ms`` (the Kafka timestamps) for the
    watermark.
    """
    us = extract_us(spec, values)
    missing = pc.is_null(us).to_numpy(zero_copy_only=False)
    ms = np.floor_divide(pc.fill_null(us, 0).to_numpy(zero_copy_only=False), 1000)
    future = beyond_cutoff(ms, cutoff_ms) & ~missing
    bad = missing | future
    if bad.any() and spec.on_malformed == "fail":
        first = int(np.argmax(bad))
        field = ".".join(spec.path)
        why = (f"an eventTime.field {field!r} {cutoff_text(cutoff_ms)}" if future[first]
               else f"no valid eventTime.field {field!r} ({spec.format})")
        raise MalformedEventTimeError(
            f"record at offset {int(offsets[first])} of topic {topic!r} partition {partition} has {why}; "
            "set eventTime.onMalformed=null to keep such records with a null eventTime")
    if future.any():
        us = pc.if_else(pa.array(future), pa.scalar(None, pa.int64()), us)
    column = us.cast(_TS_US)
    if bad.any():
        ms = np.where(bad, fallback_ms, ms)
    return column, np.asarray(ms, dtype=np.int64)


def watermark_times(spec: EventTimeSpec | None, on_malformed: str, values: pa.Array, kafka_ms: np.ndarray, *,
                    topic: str, partition: int, offsets: np.ndarray,
                    cutoff_ms: int | None) -> tuple[pa.Array | None, np.ndarray, np.ndarray | None]:
    """What a chunk of records brings to the watermark, on a read task and in the driver's scan
    alike: the ``eventTime`` column (None without ``eventTime.field``), the event times in ms,
    and which records count for nothing (None: every one counts) — those whose event time,
    after ``onMalformed``'s fallback, is still later than ``cutoff_ms``. With the Kafka
    timestamp as the event time, such a record fails the read under ``onMalformed=fail``."""
    if spec is None:
        column, ms = None, kafka_ms
    else:
        column, ms = event_times(spec, values, kafka_ms, topic=topic, partition=partition, offsets=offsets,
                                 cutoff_ms=cutoff_ms)
    if cutoff_ms is None:
        return column, ms, None
    future = beyond_cutoff(ms, cutoff_ms)
    if not future.any():
        return column, ms, None
    if spec is None and on_malformed == "fail":
        first = int(np.argmax(future))
        raise MalformedEventTimeError(
            f"record at offset {int(offsets[first])} of topic {topic!r} partition {partition} has a "
            f"timestamp {int(ms[first])} {cutoff_text(cutoff_ms)}; set eventTime.onMalformed=null to keep "
            "such records with a null timestamp")
    return column, ms, future
