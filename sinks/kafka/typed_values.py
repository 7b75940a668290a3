"""Typed keys and values written by the jetkafka sink: a column (or, for the value, the row's
other columns) encoded as Avro, Protobuf or JSON (of a JSON Schema), in Confluent's wire format
with a schema of the Schema Registry, or plain with a schema given inline.

Options (``value.*``, and the same ``key.*`` for keys; the words of the source's options):

* ``value.format`` — ``bytes`` (the default: Spark's string or binary column), ``avro``,
  ``protobuf`` or ``json-schema``;
* ``schemaRegistry.*`` — the registry (:mod:`jetspark.schemas.registry`); without it the values
  are plain Avro or Protobuf of the inline schema (no wire-format header);
* the writer schema: the subject's ``value.schema.version`` (default: its latest version when the
  query is planned), or ``value.schema`` inline, which must be registered under the subject
  already; the subject is ``value.subject``, else named by ``value.subject.strategy`` from option
  ``topic`` (``topic``: ``<topic>-value``; ``record`` / ``topic-record`` with
  ``value.subject.record``); Protobuf: ``value.message``, the message of the schema's file
  (default: ``value.subject.record``, else the file's first message), and with a registry only
  the subject's versions (no inline schema, no registering);
* ``value.schema.register`` — ``false`` (the default: production registries usually forbid
  clients to register) or ``true``: the inline schema, or without one (Avro only) the schema of
  the column's Spark type (:func:`jetspark.schemas.avro_encode.schema_of`), is registered under
  the subject when the registry lacks it.

The value is the ``value`` column (a struct, or any type the schema's takes); without a
``value`` column, the row's columns other than ``key``, ``topic``, ``partition`` and
``headers``. The type must fit the schema when the query is planned
(:mod:`jetspark.schemas.avro_encode`, :mod:`jetspark.schemas.protobuf_encode`,
:mod:`jetspark.schemas.json_encode`); a row whose
value does not fit is rejected, as
``onRejected`` says, its dead letter holding the value as JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from jetspark.errors import OptionError
from jetspark.options import Options
from jetspark.redaction import redacted_repr
from jetspark.schemas import protobuf_types, wire
from jetspark.schemas.avro_encode import AvroEncoder, avro_encoder, schema_text_of
from jetspark.schemas.avro_types import AvroSchemaError
from jetspark.schemas.json_encode import JsonEncoder, json_encoder
from jetspark.schemas.json_schema_types import JsonSchemaError
from jetspark.schemas.protobuf_encode import ProtobufEncoder, protobuf_encoder
from jetspark.schemas.registry import RegistryClient, RegistrySettings, SchemaRegistryError
from jetspark.schemas.subjects import format_option, subject_option, version_option
from jetspark.sinks.transactional import SinkError

COLUMNS = ("key", "value")
FORMATS = ("bytes", "avro", "protobuf", "json-schema")
_REGISTRY_TYPE = {"avro": "AVRO", "json-schema": "JSON"}
_NAME = {"avro": "Avro", "protobuf": "Protobuf", "json-schema": "JSON"}
_SUFFIXES = ("format", "schema", "schema.version", "schema.register", "subject", "subject.strategy",
             "subject.record", "message")
OPTIONS = tuple(f"{column}.{suffix}" for column in COLUMNS for suffix in _SUFFIXES)
KAFKA_COLUMNS = ("key", "topic", "partition", "headers")
"""The columns that are not the value when the value is the row's columns."""
_NOT_FOUND = 404


@dataclass(frozen=True)
class TypedValues:
    """How the sink encodes its ``value`` (or ``key``) column."""

    column: str
    encoder: AvroEncoder | ProtobufEncoder | JsonEncoder
    schema_id: int | None
    """The registry's id of the writer schema (None: plain Avro, no wire-format header)."""
    where: str
    """The schema, named for a reason: ``subject orders-value version 3 (id 7)``."""
    from_row: bool = False
    """The value is the row's columns other than the Kafka ones (there is no ``value`` column)."""
    prefix: bytes = b""
    """Bytes before every payload, behind the wire header: Protobuf's message indexes."""

    def __repr__(self) -> str:
        return redacted_repr(self, hidden=("encoder",))

    def encode(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, dict[int, str]]:
        """``batch`` with this column encoded (binary), and why each row that does not fit
        does not; such a row's column holds its value as JSON, for its dead letter."""
        values = _values(batch, self.column, self.from_row)
        payloads, unfit = self.encoder.encode(values)
        if self.prefix:
            payloads = pc.binary_join_element_wise(pa.scalar(self.prefix, pa.binary()), payloads, b"")
        if self.schema_id is not None:
            payloads = wire.frame(self.schema_id, payloads)
        if unfit:
            rows = sorted(unfit)
            mask = np.zeros(len(payloads), bool)
            mask[rows] = True
            letters = pa.array([json.dumps(values[i].as_py(), default=str, ensure_ascii=False).encode()
                                for i in rows], pa.binary())
            payloads = pc.replace_with_mask(payloads, pa.array(mask), letters)
            kind = {AvroEncoder: "Avro", ProtobufEncoder: "Protobuf", JsonEncoder: "JSON"}[type(self.encoder)]
            unfit = {i: f"its {self.column} does not fit the {kind} schema ({self.where}): {why}"
                     for i, why in unfit.items()}
        names = [n.lower() for n in batch.schema.names]
        if self.column in names:
            index = names.index(self.column)
            batch = batch.set_column(index, pa.field(batch.schema.names[index], pa.binary()), payloads)
        else:
            batch = batch.append_column(pa.field(self.column, pa.binary()), payloads)
        return batch, unfit


def _values(batch: pa.RecordBatch, column: str, from_row: bool) -> pa.Array:
    if not from_row:
        return batch.column([n.lower() for n in batch.schema.names].index(column))
    kept = [i for i, n in enumerate(batch.schema.names) if n.lower() not in KAFKA_COLUMNS]
    return pa.StructArray.from_arrays([batch.column(i) for i in kept],
                                      fields=[batch.schema.field(i) for i in kept])


def value_type(schema: T.StructType, column: str) -> tuple[T.DataType | None, bool]:
    """The Spark type the sink encodes for ``column``, and whether it is the row's columns."""
    fields = {f.name.lower(): f for f in schema.fields}
    if column in fields:
        return fields[column].dataType, False
    if column == "key":
        return None, False
    rest = [f for f in schema.fields if f.name.lower() not in KAFKA_COLUMNS]
    return (T.StructType(rest), True) if rest else (None, False)


def plan(options: dict[str, str], schema: T.StructType, topic: str | None) -> dict[str, TypedValues]:
    """The typed columns the options ask for, by column, their schemas found (or registered)
    and checked against the DataFrame's types."""
    opts = Options(options)
    out = {}
    for column in COLUMNS:
        typed = _plan_column(opts, schema, topic, column)
        if typed is not None:
            out[column] = typed
    return out


def _plan_column(opts: Options, schema: T.StructType, topic: str | None, column: str) -> TypedValues | None:
    fmt = format_option(opts, column, FORMATS, _SUFFIXES)
    if fmt == "bytes":
        return None
    spark, from_row = value_type(schema, column)
    if spark is None:
        raise SinkError(f"{column}.format={fmt} needs a {column!r} column" +
                        (" or other columns" if column == "value" else ""))
    if fmt == "protobuf":
        return _plan_protobuf(opts, spark, from_row, topic, column)
    registry = RegistrySettings.parse(opts)
    inline = opts.string(f"{column}.schema")
    register = opts.boolean(f"{column}.schema.register", False)
    if registry is None:
        if inline is None:
            raise OptionError(f"{column}.format", fmt,
                              f"bytes, unless schemaRegistry.url or {column}.schema is given")
        if register:
            raise OptionError(f"{column}.schema.register", "true",
                              "false, unless schemaRegistry.url is given")
        return TypedValues(column, _encoder(fmt, inline, spark, column, "the inline schema"), None,
                           f"{column}.schema", from_row)
    subject = subject_option(opts, (topic,) if topic else (), column, "option 'topic' is set")
    version = version_option(opts, column)
    if inline is not None and opts.get(f"{column}.schema.version") is not None:
        raise OptionError(f"{column}.schema.version", opts.get(f"{column}.schema.version"),
                          f"nothing when {column}.schema is given (its version is the one that holds it)")
    client = RegistryClient(registry)
    if inline is None and not register:
        try:
            found = client.version(subject, version)
        except SchemaRegistryError as e:
            if e.status != _NOT_FOUND or version is not None:
                raise
            raise _register_off(column, subject, "has no schema") from None
        if found.schema_type != _REGISTRY_TYPE[fmt]:
            raise OptionError(f"{column}.format", fmt, f"the format of subject {subject!r}'s schemas "
                              f"({found.schema_type})")
        text, schema_id, found_version = found.text, found.schema_id, found.version
    else:
        if inline is None and fmt != "avro":
            raise OptionError(f"{column}.schema", None, "the JSON Schema to register (the sink derives "
                              "only Avro schemas from Spark types)")
        text = inline if inline is not None else schema_text_of(spark)
        # the type must fit before anything is registered
        given = "the inline schema" if inline is not None else "its derived schema"
        _encoder(fmt, text, spark, column, given)
        schema_id, found_version = _registered(client, subject, _REGISTRY_TYPE[fmt], text, register, column)
    where = f"subject {subject} version {found_version} (id {schema_id})"
    return TypedValues(column, _encoder(fmt, text, spark, column, where), schema_id, where, from_row)


def _plan_protobuf(opts: Options, spark: T.DataType, from_row: bool, topic: str | None, column: str
                   ) -> TypedValues:
    """Protobuf: the subject's version with a registry (its message indexes before each payload),
    else the inline file."""
    registry = RegistrySettings.parse(opts)
    inline = opts.string(f"{column}.schema")
    if opts.boolean(f"{column}.schema.register", False):
        raise OptionError(f"{column}.schema.register", "true", "false: the sink does not register Protobuf "
                          "schemas (register the .proto with your tooling; the sink writes with it)")
    if registry is None:
        if inline is None:
            raise OptionError(f"{column}.format", "protobuf",
                              f"bytes, unless schemaRegistry.url or {column}.schema is given")
        file = protobuf_types.load_file(inline, lambda _name: None)
        schema_id, where = None, f"{column}.schema"
    else:
        if inline is not None:
            raise OptionError(f"{column}.schema", inline[:200], "nothing with schemaRegistry.url and "
                              f"{column}.format=protobuf: the sink writes with the subject's version "
                              f"({column}.schema.version)")
        client = RegistryClient(registry)
        subject = subject_option(opts, (topic,) if topic else (), column, "option 'topic' is set")
        try:
            found = client.version(subject, version_option(opts, column), serialized=True)
        except SchemaRegistryError as e:
            if e.status == _NOT_FOUND and version_option(opts, column) is None:
                raise OptionError(f"{column}.subject", subject, "a subject that holds the Protobuf schema to "
                                  "write with (the registry has none)") from None
            raise
        if found.schema_type != "PROTOBUF":
            raise OptionError(f"{column}.format", "protobuf", f"the format of subject {subject!r}'s schemas "
                              f"({found.schema_type})")
        file = protobuf_types.registered_file(client, found)
        schema_id = found.schema_id
        where = f"subject {subject} version {found.version} (id {schema_id})"
    message = protobuf_types.message_option(file, opts, column)
    try:
        encoder = protobuf_encoder(protobuf_types.file_set(file), message.full_name, spark, column)
    except protobuf_types.ProtobufSchemaError as e:
        raise SinkError(f"the {column} column does not fit the Protobuf message {message.full_name} "
                        f"({where}): {e}") from None
    return TypedValues(column, encoder, schema_id, where, from_row,
                       encoder.indexes() if schema_id is not None else b"")


def _registered(client: RegistryClient, subject: str, schema_type: str, text: str, register: bool,
                column: str) -> tuple[int, int | None]:
    """The id and version of ``text`` under ``subject``; registered there when it is not and
    ``register`` allows it."""
    try:
        found = client.lookup(subject, schema_type, text)
        return found.schema_id, found.version
    except SchemaRegistryError as e:
        if e.status != _NOT_FOUND:
            raise
        if not register:
            raise _register_off(column, subject, "does not hold the schema") from None
    schema_id = client.register(subject, schema_type, text)
    return schema_id, client.lookup(subject, schema_type, text).version


def _register_off(column: str, subject: str, lacking: str) -> OptionError:
    return OptionError(f"{column}.schema.register", "false",
                       f"true, to register the schema under subject {subject!r}, which {lacking} (off by "
                       f"default: registries in production usually forbid it; or register it yourself)")


def _encoder(fmt: str, text: str, spark: T.DataType, column: str, where: str) -> AvroEncoder | JsonEncoder:
    try:
        return avro_encoder(text, spark, column) if fmt == "avro" else json_encoder(text, spark, column)
    except (AvroSchemaError, JsonSchemaError) as e:
        raise SinkError(f"the {column} column does not fit the {_NAME[fmt]} schema ({where}): {e}") from None
