"""Typed keys and values: jetkafka's ``key`` and ``value`` columns decoded from Avro, Protobuf
or JSON Schema's JSON, in Confluent's wire format with the schemas in a Schema Registry, or
plain (no wire header) with a schema given inline.

Options (``value.*``, and the same ``key.*`` for keys, each parsed once into a
:class:`TypedValues`; the registry is shared):

* ``value.format`` — ``bytes`` (the default: Spark's binary column), ``avro``, ``protobuf`` or
  ``json-schema``;
* ``schemaRegistry.*`` — the registry (:mod:`jetspark.schemas.registry`); without it the
  values are plain Avro or JSON documents of the inline schema;
* the reader schema: ``value.schema`` (inline), else the subject's ``value.schema.version``
  (default: its latest version when the query is planned); the subject is ``value.subject``,
  else named by ``value.subject.strategy`` (``topic``: ``<topic>-value``, or ``<topic>-key``
  for keys, of the one subscribed topic; ``record`` / ``topic-record`` with
  ``value.subject.record``); Protobuf: ``value.message``, the message of the schema's file
  (default: ``value.subject.record``, else the file's first message);
* ``value.onMalformed`` — ``null`` (the default: the row stays, ``value`` null and
  ``valueError`` saying why; ``keyError`` for keys) or ``fail`` (the read fails, naming topic,
  partition and offset).

Avro: the Spark type of ``value`` is the reader schema's, as Spark's ``from_avro`` types it.
Each record's writer schema is the one its schema id names (asked once per id and worker
process), resolved against the reader schema by Avro's rules; records are decoded natively, a
column at a time (:mod:`jetspark.schemas.avro_program`).

Protobuf: the Spark type of ``value`` is the reader message's, as Spark's ``from_protobuf``
types it (:mod:`jetspark.schemas.protobuf_types`). Records are decoded by field number with the
reader's message, natively, a column at a time (:mod:`jetspark.schemas.protobuf_program`); a
record's schema id must be a Protobuf schema in the registry, and its message indexes must name
a message of the reader's full name (a topic of several message types: one per query).

JSON Schema: the Spark type is the reader schema's (:mod:`jetspark.schemas.json_schema_types`);
JSON names its fields, so documents of any writer schema are read by name (fields the reader
lacks are ignored, fields a document lacks are null); a record's schema id must still be a JSON
schema in the registry. A batch is parsed at once by Arrow (:mod:`jetspark.schemas.json_values`).
"""

from __future__ import annotations

import functools
import hashlib
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from jetspark.datasources.kafka import writer_costs
from jetspark.errors import JetsparkError, OptionError
from jetspark.lazy_module import LazyModule
from jetspark.options import Options
from jetspark.redaction import redacted_repr
from jetspark.schemas import json_values, wire
from jetspark.schemas.registry import RegisteredSchema, RegistryClient, RegistrySettings, SchemaRegistryError
from jetspark.schemas.subjects import format_option, subject_option, version_option

if TYPE_CHECKING:
    from jetspark.schemas.avro_program import Program

# The decoders, imported when a typed column is first parsed or decoded: a process that reads
# bytes only (most source planners and readers) does not import them.
avro_program = LazyModule("jetspark.schemas.avro_program")
avro_types = LazyModule("jetspark.schemas.avro_types")
json_schema_types = LazyModule("jetspark.schemas.json_schema_types")
protobuf_program = LazyModule("jetspark.schemas.protobuf_program")
protobuf_types = LazyModule("jetspark.schemas.protobuf_types")

COLUMNS = ("key", "value")
"""The columns that can be typed, in the order their error columns follow the others."""
FORMATS = ("bytes", "avro", "protobuf", "json-schema")


@dataclass(frozen=True)
class _Format:
    registry_type: str
    """The registry's schemaType of the format's schemas."""
    name: str
    a_schema: str


_FORMATS = {"avro": _Format("AVRO", "Avro", "an Avro schema"),
            "protobuf": _Format("PROTOBUF", "Protobuf", "a Protobuf schema (a base64 FileDescriptorProto)"),
            "json-schema": _Format("JSON", "JSON Schema", "a JSON Schema")}
_FORMAT_OF = {"AVRO": "avro", "JSON": "json-schema", "PROTOBUF": "protobuf"}
"""The ``value.format`` that reads a registry schemaType's schemas."""
ON_MALFORMED = ("null", "fail")
_SUFFIXES = ("format", "schema", "schema.version", "subject", "subject.strategy", "subject.record",
             "message", "onMalformed", "flatten")
OPTIONS = tuple(f"{column}.{suffix}" for column in COLUMNS for suffix in _SUFFIXES)


class MalformedValueError(JetsparkError):
    """A key or value did not decode and ``onMalformed=fail``."""


@dataclass(frozen=True)
class TypedValues:
    """How the ``value`` (or ``key``) column is decoded: the reader schema and where writer
    schemas are."""

    reader_text: str
    """The reader schema (Avro's JSON, a JSON Schema, or Protobuf's file with its imports as a
    base64 ``FileDescriptorSet``)."""
    registry: RegistrySettings | None
    """None: plain Avro values written with the reader schema itself."""
    on_malformed: str = "null"
    reader_id: int | None = None
    """The registry's id of the reader schema (None when given inline)."""
    reader_subject: str | None = None
    reader_version: int | None = None
    """The subject and version the reader schema was found under (None when given inline)."""
    spark: T.DataType = field(default=T.BinaryType(), compare=False)
    fmt: str = "avro"
    """``avro``, ``protobuf`` or ``json-schema``."""
    column: str = "value"
    """``value`` or ``key``: the column decoded, whose options these are."""
    message: str | None = None
    """Protobuf: the full name of the reader's message."""
    flatten: bool = False
    """The struct's fields take the column's place (``value.flatten``), named as they are."""

    @property
    def error_column(self) -> str:
        """The column saying why a value did not decode (null when it did): ``valueError``, ``keyError``."""
        return f"{self.column}Error"

    def __repr__(self) -> str:
        return redacted_repr(self, hidden=("reader_text", "spark"))

    @property
    def reader(self) -> dict:
        """The reader schema as a batch's offset records it (``readers``): the registry's subject,
        version and id, or the SHA-256 of an inline schema; Protobuf's message too."""
        out: dict = ({"subject": self.reader_subject, "version": self.reader_version, "id": self.reader_id}
                     if self.reader_id is not None
                     else {"sha256": hashlib.sha256(self.reader_text.encode()).hexdigest()})
        if self.message is not None:
            out["message"] = self.message
        return out

    @classmethod
    def parse(cls, opts: Options, topics: tuple[str, ...], column: str = "value") -> TypedValues | None:
        """The typed ``column`` the options ask for (None: ``<column>.format=bytes``). Asks the
        registry for the reader schema when it is not inline."""
        fmt = format_option(opts, column, FORMATS, _SUFFIXES)
        registry = RegistrySettings.parse(opts)
        if fmt == "bytes":
            return None
        on_malformed = opts.choice(f"{column}.onMalformed", "null", ON_MALFORMED)
        inline = opts.string(f"{column}.schema")
        if inline is not None:
            reader_text, reader_id, subject, version = inline, None, None, None
        elif registry is None:
            raise OptionError(f"{column}.format", fmt,
                              f"bytes, unless schemaRegistry.url or {column}.schema is given")
        else:
            client = RegistryClient(registry)
            reader = client.version(subject_option(opts, topics, column), version_option(opts, column),
                                    serialized=fmt == "protobuf")
            if reader.schema_type != _FORMATS[fmt].registry_type:
                wanted = _FORMAT_OF.get(reader.schema_type, reader.schema_type.lower())
                raise OptionError(f"{column}.format", fmt, f"{wanted} (the subject {reader.subject!r} "
                                  f"holds a schema of type {reader.schema_type})")
            reader_text, reader_id = reader.text, reader.schema_id
            subject, version = reader.subject, reader.version
        message = None
        try:
            if fmt == "avro":
                data_type, _ = avro_types.spark_type(reader_text)
                avro_program.compile_program(reader_text)  # the reader schema must decode its own records
            elif fmt == "protobuf":
                file = (protobuf_types.load_file(reader_text, lambda _name: None) if inline is not None
                        else protobuf_types.registered_file(client, reader))
                message = protobuf_types.message_option(file, opts, column)
                data_type = protobuf_types.spark_type(message)
                reader_text, message = protobuf_types.file_set(file), message.full_name
            else:
                data_type = json_schema_types.spark_type(reader_text)
        except (avro_types.AvroSchemaError, json_schema_types.JsonSchemaError,
                protobuf_types.ProtobufSchemaError) as e:
            raise OptionError(f"{column}.schema", reader_text[:200],
                              f"{_FORMATS[fmt].a_schema} Spark can type: {e}") from None
        flatten = opts.boolean(f"{column}.flatten", False)
        if flatten and not isinstance(data_type, T.StructType):
            raise OptionError(f"{column}.flatten", "true", f"false: the {column}s' type "
                              f"{data_type.simpleString()} has no fields to take the column's place")
        return cls(reader_text, registry, on_malformed, reader_id, subject, version, data_type, fmt, column,
                   message, flatten)

    # -- reading ---------------------------------------------------------------------------------
    def decode_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` (the source's rows, this column binary) with the column decoded and its
        error column (``valueError``, ``keyError``) appended."""
        index = batch.schema.get_field_index(self.column)
        values, errors = self.decode_values(batch.column(index))
        if self.on_malformed == "fail" and errors.null_count < len(errors):
            first = int(pc.index(pc.is_valid(errors), True).as_py())
            at = {name: batch.column(batch.schema.get_field_index(name))[first]
                  for name in ("topic", "partition", "offset")}
            raise MalformedValueError(
                f"jetkafka: the {self.column} of {at['topic']} partition {at['partition']} offset "
                f"{at['offset']} did not decode: "
                f"{errors[first]} ({self.column}.onMalformed=fail; null keeps the row with "
                f"{self.error_column})")
        columns = list(batch.columns)
        fields = [pa.field(self.column, values.type)]
        replaced = [values]
        if self.flatten:  # the struct's fields in its place (a null value: every field null)
            fields, replaced = list(values.type), values.flatten()
        names = [*batch.schema.names[:index], *(f.name for f in fields), *batch.schema.names[index + 1:],
                 self.error_column]
        columns = [*columns[:index], *replaced, *columns[index + 1:], errors]
        return pa.RecordBatch.from_arrays(columns, names=names)

    def decode_values(self, values: pa.Array, *, remember: bool = False) -> tuple[pa.Array, pa.Array]:
        """Each value decoded (null where it is null or did not decode) and why not (null where
        it decoded, or was null). ``remember``: keep the result for the next call with the same
        column (the event time is read from a chunk's values before its batch is decoded)."""
        key = (_identity(values), self)
        last = getattr(_LAST, "entry", None)
        if last is not None and last[0] == key:
            _LAST.entry = None
            return last[1]
        result = self._decode_values(values)
        _LAST.entry = (key, result, values) if remember else None  # values kept: their buffers stay theirs
        return result

    def _decode_values(self, values: pa.Array) -> tuple[pa.Array, pa.Array]:
        values = values.cast(pa.binary()) if values.type != pa.binary() else values
        n = len(values)
        out_type = _arrow(self.spark)
        reasons = _Reasons(n)
        if self.fmt == "json-schema":
            return self._decode_json(values, out_type, reasons)
        if self.fmt == "protobuf":
            return self._decode_protobuf(values, out_type, reasons)
        if self.registry is None:
            program = _program(self.reader_text, self.reader_text)
            framed = _unframed(values)
            decoded, codes = avro_program.decode(program, framed.starts, framed.ends, framed.data)
            bad = np.flatnonzero((codes != 0) & (framed.schema_ids != wire.NULL))
            reasons.set(bad, [program.reason(int(c)) for c in codes[bad]])
            return decoded, reasons.array()
        framed = wire.split(values)
        pieces, rows = [], []
        reasons.set(np.flatnonzero(framed.schema_ids == wire.UNFRAMED),
                    "not in Confluent's wire format (no magic byte 0 and 4-byte schema id)")
        client = _client(self.registry)
        for schema_id in framed.ids():
            at = np.flatnonzero(framed.schema_ids == schema_id)
            try:
                program = self._usable(schema_id, lambda sid=schema_id: self._writer_program(client, sid))
            except _Unusable as e:
                reasons.set(at, str(e))
                continue
            decoded, codes = avro_program.decode(program, framed.starts[at], framed.ends[at], framed.data)
            bad = np.flatnonzero(codes != 0)
            reasons.set(at[bad], [f"schema id {schema_id}: {program.reason(int(c))}" for c in codes[bad]])
            pieces.append(decoded)
            rows.append(at)
        return _in_order(pieces, rows, n, out_type), reasons.array()

    def _decode_json(self, values: pa.BinaryArray, out_type: pa.DataType,
                     reasons: _Reasons) -> tuple[pa.Array, pa.Array]:
        if self.registry is None:
            keep = np.asarray(values.is_valid(), dtype=bool)
            payloads = values
        else:
            framed = wire.split(values)
            reasons.set(np.flatnonzero(framed.schema_ids == wire.UNFRAMED),
                        "not in Confluent's wire format (no magic byte 0 and 4-byte schema id)")
            keep = framed.schema_ids >= 0
            client = _client(self.registry)
            for schema_id in framed.ids():
                try:
                    self._usable(schema_id, lambda sid=schema_id: self._writer(client, sid))
                except _Unusable as e:
                    at = framed.schema_ids == schema_id
                    reasons.set(np.flatnonzero(at), str(e))
                    keep &= ~at
            payloads = framed.payloads
        decoded, bad, why = json_values.decode(payloads, keep, out_type)
        reasons.set(bad, why)
        return decoded, reasons.array()

    def _decode_protobuf(self, values: pa.BinaryArray, out_type: pa.DataType,
                         reasons: _Reasons) -> tuple[pa.Array, pa.Array]:
        program = _protobuf_program(self.reader_text, self.message)
        if self.registry is None:
            framed = _unframed(values)
            starts, take = framed.starts, np.flatnonzero(framed.schema_ids != wire.NULL)
        else:
            framed = wire.split(values)
            reasons.set(np.flatnonzero(framed.schema_ids == wire.UNFRAMED),
                        "not in Confluent's wire format (no magic byte 0 and 4-byte schema id)")
            keys, starts = protobuf_program.message_keys(framed.starts, framed.ends, framed.data)
            client = _client(self.registry)
            good = []
            for schema_id in framed.ids():
                at = np.flatnonzero(framed.schema_ids == schema_id)
                try:
                    file = self._usable(schema_id, lambda sid=schema_id: self._writer_file(client, sid))
                except _Unusable as e:
                    reasons.set(at, str(e))
                    continue
                for key in np.unique(keys[at]):
                    rows = at[keys[at] == key]
                    why = _other_message(file, int(key), self.message)
                    if why is None:
                        good.append(rows)
                    else:
                        reasons.set(rows, f"schema id {schema_id}: {why}")
            take = np.sort(np.concatenate(good)) if good else np.zeros(0, np.int64)
        decoded, codes = protobuf_program.decode(program, starts[take], framed.ends[take], framed.data)
        bad = np.flatnonzero(codes != 0)
        reasons.set(take[bad], [protobuf_program.ERRORS[int(c)] for c in codes[bad]])
        return _in_order([decoded], [take], len(values), out_type), reasons.array()

    def _usable(self, schema_id: int, prepare):
        """What ``prepare()`` makes of writer ``schema_id`` (its program, file or schema), or
        :class:`_Unusable` saying why the id's records cannot be read — decided once per
        registry, id and reader for the process. Only a registry that cannot be reached, refuses
        the credentials (401) or fails (5xx) fails the task (retried); every other failure is
        the id's, so its records are malformed and the others are read."""
        key = (self.registry, schema_id, self.fmt, self.reader_text, self.message)
        with _PROGRAMS_LOCK:
            why = _UNUSABLE.get(key)
            ready = _READY.get(key)
        if why is not None:
            raise _Unusable(why)
        if ready is not None:
            return ready
        started, outcome = time.perf_counter(), "failed (the task fails)"
        try:
            ready = self._decide(key, schema_id, prepare)
            outcome = "usable"
            return ready
        except _Unusable:
            outcome = "unusable"
            raise
        finally:
            writer_costs.count(self.column, schema_id, self.fmt, outcome, time.perf_counter() - started)

    def _decide(self, key: tuple, schema_id: int, prepare):
        """What ``prepare()`` makes of the writer, kept; or :class:`_Unusable`, kept when it lasts."""
        try:
            ready = prepare()
            with _PROGRAMS_LOCK:
                _READY[key] = ready
            return ready
        except _Unusable as e:
            why = str(e)
        except SchemaRegistryError as e:
            if not e.answered:
                raise  # the registry is down or refuses us: the task fails and is retried
            why = (f"schema id {schema_id} is not in the Schema Registry"
                   if e.status == 404 and f"/schemas/ids/{schema_id}" in str(e)
                   else f"schema id {schema_id} cannot be had: {e}")
            if not e.lasting:  # 429: the registry may answer later; this chunk's records are malformed
                raise _Unusable(_printable(why)) from None
        except avro_types.AvroSchemaError as e:
            why = f"schema id {schema_id} does not resolve to the reader's schema: {e}"
        except protobuf_types.ProtobufSchemaError as e:
            why = f"schema id {schema_id}: {e}"
        except Exception as e:  # a writer schema no compiler takes (KeyError, IsADirectoryError...): the id's
            why = f"schema id {schema_id} cannot be read: {type(e).__name__}: {str(e)[:200]}"
        why = _printable(why)
        with _PROGRAMS_LOCK:
            if len(_UNUSABLE) >= _MAX_UNUSABLE:
                del _UNUSABLE[next(iter(_UNUSABLE))]
            _UNUSABLE[key] = why
        raise _Unusable(why) from None

    def _writer(self, client: RegistryClient, schema_id: int) -> RegisteredSchema:
        """The writer schema ``schema_id`` names, if it is one of this format's."""
        writer = client.schema(schema_id, serialized=self.fmt == "protobuf")
        wanted = _FORMATS[self.fmt]
        if writer.schema_type != wanted.registry_type:
            raise _Unusable(f"schema id {schema_id} is of type {writer.schema_type}, not {wanted.name}")
        return writer

    def _writer_program(self, client: RegistryClient, schema_id: int) -> Program:
        return _program(self._writer(client, schema_id).text, self.reader_text)

    def _writer_file(self, client: RegistryClient, schema_id: int):
        """The file of a writer's Protobuf schema id, its imports asked once per version."""
        return protobuf_types.registered_file(client, self._writer(client, schema_id))


_LAST = threading.local()
"""The last remembered decoding of this thread: (key, result, the values it was of)."""


def _identity(values: pa.Array) -> tuple:
    """What tells one column from another while both are alive: its buffers' addresses."""
    return (tuple(0 if b is None else b.address for b in values.buffers()), values.offset, len(values),
            values.type)


class _Reasons:
    """Why values did not decode, built only for the rows that did not (most batches have none)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.rows: list[np.ndarray] = []
        self.texts: list[object] = []

    def set(self, rows: np.ndarray, text: str | list[str]) -> None:
        if len(rows):
            self.rows.append(rows)
            self.texts.append(text)

    def array(self) -> pa.Array:
        if not self.rows:
            return pa.nulls(self.n, pa.string())
        out = np.full(self.n, None, dtype=object)
        for rows, text in zip(self.rows, self.texts, strict=True):
            out[rows] = text
        return pa.array(out, pa.string())


@functools.lru_cache(maxsize=16)
def _client(settings: RegistrySettings) -> RegistryClient:
    """One client per registry and process (its TLS context and opener are built once)."""
    return RegistryClient(settings)


class _Unusable(Exception):
    """A writer schema that cannot decode into the reader's: its records are malformed."""


_READY: dict[tuple, object] = {}
"""Each usable writer id's program, file or schema, by the same key."""
_UNUSABLE: dict[tuple, str] = {}
"""Why a writer id cannot be read, by (registry, id, format, reader, message), for the process."""
_MAX_UNUSABLE = 100_000


def _printable(text: str) -> str:
    """``text`` as a ``valueError`` can hold it (a lone surrogate from a schema escaped)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


_PROGRAMS: dict[tuple[str, str], Program] = {}
_PROGRAMS_LOCK = threading.Lock()


def _program(writer: str, reader: str) -> Program:
    """The compiled (writer, reader) pair, kept for the process."""
    key = (writer, reader)
    with _PROGRAMS_LOCK:
        found = _PROGRAMS.get(key)
    if found is None:
        found = avro_program.compile_program(writer, reader)
        with _PROGRAMS_LOCK:
            _PROGRAMS[key] = found
    return found


_PROTOBUF_PROGRAMS: dict[tuple[str, str | None], protobuf_program.Program] = {}


def _protobuf_program(file_set: str, message: str | None) -> protobuf_program.Program:
    """The reader's compiled message, kept for the process."""
    key = (file_set, message)
    with _PROGRAMS_LOCK:
        found = _PROTOBUF_PROGRAMS.get(key)
    if found is None:
        file = protobuf_types.load_set(file_set)
        found = protobuf_program.compile_program(protobuf_types.message(file, message))
        with _PROGRAMS_LOCK:
            _PROTOBUF_PROGRAMS[key] = found
    return found


def _other_message(file, key: int, reader: str) -> str | None:
    """Why records of message ``key`` of a writer's file are not the reader's message (None: they are)."""
    if key == protobuf_program.KEY_BAD:
        return "its message indexes are cut short"
    indexes = protobuf_program.indexes_of(key)
    if indexes is None:
        return "its message indexes go deeper than 4 or past 32767 (not read)"
    name = protobuf_types.message_at(file, indexes)
    if name is None:
        return f"the file has no message at indexes {list(indexes)}"
    return None if name == reader else f"message {name} is not the reader's {reader}"


def _unframed(values: pa.BinaryArray) -> wire.Framed:
    """Plain Avro values: each whole value is the payload (null ones marked)."""
    n = len(values)
    _validity, offsets_buf, data_buf = values.buffers()
    offsets = np.frombuffer(offsets_buf, np.int32, n + 1, values.offset * 4).astype(np.int64)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    ids = np.where(np.asarray(values.is_null(), dtype=bool), wire.NULL, 0)
    return wire.Framed(ids, offsets[:-1], offsets[1:], data)


def _in_order(pieces: list[pa.Array], rows: list[np.ndarray], n: int, out_type: pa.DataType) -> pa.Array:
    """The decoded groups put back in the rows' order; rows in no group are null."""
    if not pieces:
        return pa.nulls(n, out_type)
    pieces = [p.cast(out_type) if p.type != out_type else p for p in pieces]
    if len(pieces) == 1 and len(rows[0]) == n:  # one schema id for every row: already in order
        return pieces[0]
    decoded = pa.concat_arrays(pieces)
    position = np.full(n, len(decoded), np.int64)  # rows in no group point past the end: null
    position[np.concatenate(rows)] = np.arange(len(decoded))
    padded = pa.concat_arrays([decoded, pa.nulls(1, out_type)])
    return padded.take(pa.array(position))


@functools.lru_cache(maxsize=64)
def _arrow(spark: T.DataType) -> pa.DataType:
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(spark, timezone="UTC")


def subscribed_topics(opts: Options) -> tuple[str, ...]:
    """The topics of ``subscribe`` (none for ``subscribePattern`` or ``assign``)."""
    raw = opts.string("subscribe")
    return tuple(t.strip() for t in raw.split(",") if t.strip()) if raw else ()


def check_planned(typed: tuple[TypedValues, ...], schema: T.StructType | str) -> None:
    """Refuse typed columns whose type is not the one the query was planned with (``schema``,
    Spark's): the reader schema is asked for again when the reader is made, and a subject's
    latest version may have moved since."""
    planned = schema.fieldNames() if isinstance(schema, T.StructType) else []
    for t in typed:
        if t.flatten:  # the struct's fields in the column's place
            fields = t.spark.fields
            changed = [schema[f.name].dataType if f.name in planned else None for f in fields] != [
                f.dataType for f in fields]
        else:
            changed = t.column in planned and schema[t.column].dataType != t.spark
        if changed:
            raise JetsparkError(
                f"jetkafka: the {t.column}s' reader schema changed while the query was planned (a "
                f"new latest version of the subject?); start the query again, or pin "
                f"{t.column}.schema.version")


class ReplayedSchemaError(JetsparkError):
    """A batch planned with one reader schema is replayed by a run that planned another."""


def check_replay(planned: tuple[TypedValues, ...], recorded: dict | None, batch: str) -> None:
    """Refuse to decode a replayed batch with a reader schema other than the one it was planned
    with (``recorded``: the batch's offset ``readers``; None: an offset from before they were
    recorded, not checked)."""
    if recorded is None:
        return
    for typed in planned:
        then = recorded.get(typed.column)
        if then is None or then == typed.reader:
            continue
        pin = (f"{typed.column}.schema.version={then['version']}" if "version" in then
               else f"the {typed.column}.schema it was planned with")
        raise ReplayedSchemaError(
            f"jetkafka: the batch ending at {batch} was planned by an earlier run with the "
            f"{typed.column}s' reader schema {_shown(then)}, and this run planned "
            f"{_shown(typed.reader)}: a replayed batch is decoded with the schema it was planned with "
            f"or not at all. Restart with {pin} to finish it; once it is committed, a restart with "
            f"the new schema reads the next batches with it")


def _shown(reader: dict) -> str:
    where = (f"subject {reader['subject']} version {reader['version']} (id {reader['id']})" if "id" in reader
             else f"given inline (SHA-256 {str(reader.get('sha256'))[:12]}…)")
    return where + (f", message {reader['message']}" if reader.get("message") else "")
