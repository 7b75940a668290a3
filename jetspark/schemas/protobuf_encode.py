"""Spark columns → Protobuf messages, a column at a time: what the jetkafka sink writes with
``value.format=protobuf`` (and ``key.format=protobuf``).

The inverse of :mod:`jetspark.schemas.protobuf_types`' types (``from_protobuf``'s): a struct's
fields are the message's fields by name (case-insensitive when unique); a message field without
a column is absent, a column without a message field is refused at planning (it would be
lost). int32-like fields take byte, short, int and long (a long outside the range: unfit);
64-bit ones any integer; ``uint32``/``uint64`` the bits Spark holds (a negative int is the
unsigned value above the signed range, as ``from_protobuf`` reads it); an enum the value's
name; ``Timestamp`` a timestamp, ``Duration`` a day-time interval; a repeated field an array,
a map field a map. A null is an absent field (a ``required`` proto2 field null: unfit); a null
element of a repeated field or map value is unfit. Fields are written in field-number order,
repeated scalars packed, as Google's serializers write them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from pyspark.sql import types as T

from jetspark.schemas import protobuf_types, ragged
from jetspark.schemas.avro_program import _arrow
from jetspark.schemas.protobuf_types import ProtobufSchemaError
from jetspark.schemas.ragged import Ragged

F = FieldDescriptor
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_INT32 = {F.TYPE_INT32, F.TYPE_SINT32, F.TYPE_SFIXED32, F.TYPE_UINT32, F.TYPE_FIXED32}
_INT64 = {F.TYPE_INT64, F.TYPE_SINT64, F.TYPE_SFIXED64, F.TYPE_UINT64, F.TYPE_FIXED64}
_SMALL = (T.ByteType, T.ShortType, T.IntegerType)
_WIRE = {**{t: _VARINT for t in (F.TYPE_INT32, F.TYPE_INT64, F.TYPE_UINT32, F.TYPE_UINT64, F.TYPE_SINT32,
                                 F.TYPE_SINT64, F.TYPE_BOOL, F.TYPE_ENUM)},
         **{t: _I64 for t in (F.TYPE_FIXED64, F.TYPE_SFIXED64, F.TYPE_DOUBLE)},
         **{t: _I32 for t in (F.TYPE_FIXED32, F.TYPE_SFIXED32, F.TYPE_FLOAT)},
         **{t: _LEN for t in (F.TYPE_STRING, F.TYPE_BYTES, F.TYPE_MESSAGE)}}
MICROS = 1_000_000


@dataclass(frozen=True)
class ProtobufEncoder:
    """Encodes a column of ``spark`` type as message ``message_name`` of the file set."""

    file_set: str
    """The file and its imports, a base64 ``FileDescriptorSet`` (:func:`protobuf_types.file_set`)."""
    message_name: str
    spark: T.DataType
    column: str = "value"

    @functools.cached_property
    def message(self) -> Descriptor:
        return protobuf_types.message(protobuf_types.load_set(self.file_set), self.message_name)

    def __getstate__(self) -> dict:
        """Pickled to the tasks without the descriptor (not picklable: rebuilt from the file set)."""
        return {k: v for k, v in self.__dict__.items() if k != "message"}

    def indexes(self) -> bytes:
        """Confluent's message indexes of the message in its file (``0``: the first message)."""
        path, d = [], self.message
        while d is not None:
            siblings = d.containing_type.nested_types if d.containing_type else list(
                d.file.message_types_by_name.values())
            path.insert(0, [s.full_name for s in siblings].index(d.full_name))
            d = d.containing_type
        if path == [0]:
            return b"\x00"
        return ragged.varints(ragged.zigzag(np.array([len(path), *path]))).body.tobytes()

    def encode(self, values: pa.Array) -> tuple[pa.BinaryArray, dict[int, str]]:
        """Each value's message (null where the value is null), and why each unfit row does
        not fit (by row; its payload is not to be written)."""
        valid = ragged.valid(values)
        unfit: dict[int, str] = {}
        payloads = _Encoding(unfit).message(self.message, self.spark, values, valid, None, self.column)
        return payloads.where(valid).to_arrow(valid), unfit


def protobuf_encoder(file_set: str, message_name: str, spark: T.DataType, column: str = "value"
                     ) -> ProtobufEncoder:
    """The encoder of a ``spark`` column as the message; raises ProtobufSchemaError naming the
    field when the type does not fit it."""
    encoder = ProtobufEncoder(file_set, message_name, spark, column)
    encoder.encode(pa.array([], _arrow(spark)))  # every field's fit is checked, whatever the rows
    return encoder


def _refuse(path: str, f: FieldDescriptor, spark: T.DataType, accepted: str) -> ProtobufSchemaError:
    kind = f.message_type.full_name if f.type == F.TYPE_MESSAGE else _TYPE_NAMES.get(f.type, str(f.type))
    return ProtobufSchemaError(f"{path} is {spark.simpleString()}, which does not fit the message's field "
                               f"{f.name} ({kind}); accepted: {accepted}")


_TYPE_NAMES = {getattr(F, n): n[5:].lower() for n in dir(F) if n.startswith("TYPE_")}


def _tag(f: FieldDescriptor, wire: int, n: int) -> Ragged:
    return ragged.constant(ragged.varints(np.array([(f.number << 3) | wire], np.uint64)).body.tobytes(), n)


def _with_length(body: Ragged) -> Ragged:
    return ragged.concat([ragged.varints(body.lengths.astype(np.uint64)), body])


class _Encoding(ragged.UnfitRows):
    """One column's encoding, and the unfit rows found on the way."""

    def message(self, d: Descriptor, spark, a: pa.Array, active: np.ndarray, rows, path: str) -> Ragged:
        """The message's fields (no tag, no length) of every active row."""
        if not isinstance(spark, T.StructType):
            raise ProtobufSchemaError(f"{path} is {spark.simpleString()}, which does not fit message "
                                      f"{d.full_name}; accepted: struct")
        children = a.flatten()
        by_name = {f.name: f for f in d.fields}
        folded: dict[str, list[FieldDescriptor]] = {}
        for f in d.fields:
            folded.setdefault(f.name.lower(), []).append(f)
        chosen, lost = [], []
        for j, column in enumerate(spark.fields):
            f = by_name.get(column.name)
            if f is None:
                candidates = folded.get(column.name.lower(), [])
                f = candidates[0] if len(candidates) == 1 else None
            if f is None:
                lost.append(column.name)
            else:
                chosen.append((f.number, f, column.dataType, children[j]))
        if lost:
            raise ProtobufSchemaError(f"{path} has field(s) {', '.join(map(repr, lost))} that message "
                                      f"{d.full_name} lacks (they would be lost): drop them, or write "
                                      f"with a schema that has them")
        parts = [self.field(f, t, child, active, rows, f"{path}.{f.name}")
                 for _n, f, t, child in sorted(chosen, key=lambda c: c[0])]
        return ragged.concat(parts) if parts else ragged.empty(len(a))

    def field(self, f: FieldDescriptor, spark, a: pa.Array, active, rows, path: str) -> Ragged:
        """The field's tag and value in every active row where it is present."""
        n = len(a)
        valid = ragged.valid(a)
        present = active & valid
        if protobuf_types.is_map(f) or f.is_repeated:
            if not isinstance(spark, T.MapType if protobuf_types.is_map(f) else T.ArrayType):
                raise _refuse(path, f, spark, "map" if protobuf_types.is_map(f) else "array")
            offsets = ragged.list_offsets(a)
            size = len(a.keys) if isinstance(spark, T.MapType) else len(a.values)
            item_active, item_rows = ragged.list_items(offsets, size, present, rows)
            if isinstance(spark, T.MapType):
                entry = f.message_type
                key, value = entry.fields_by_name["key"], entry.fields_by_name["value"]
                keys = self.field(key, spark.keyType, a.keys, item_active, item_rows, f"{path}.key")
                values = self.singular(value, spark.valueType, a.items, item_active, item_rows,
                                       f"{path}{{}}", required=True)
                body = ragged.concat([keys, values])
                items = ragged.concat([_tag(f, _LEN, size), _with_length(body)])
                return ragged.lists(items, offsets).where(present)
            values = self.value(f, spark.elementType, a.values, item_active, item_rows, f"{path}[]")
            self.mark(item_active & ~ragged.valid(a.values), item_rows,
                      lambda _i: f"{path}[] holds a null; a repeated field holds none")
            count = np.where(present, np.diff(offsets), 0)
            if _WIRE[f.type] != _LEN:  # packed
                body = ragged.lists(values, offsets)
                return ragged.concat([_tag(f, _LEN, n), _with_length(body)]).where(count > 0)
            items = ragged.concat([_tag(f, _LEN, size), values])
            return ragged.lists(items, offsets).where(count > 0)
        return self.singular(f, spark, a, active, rows, path, required=f.is_required)

    def singular(self, f, spark, a, active, rows, path: str, *, required: bool) -> Ragged:
        valid = ragged.valid(a)
        if required:
            self.mark(active & ~valid, rows, lambda _i: f"{path} is null; the field is required")
        present = active & valid
        body = self.value(f, spark, a, present, rows, path)
        return ragged.concat([_tag(f, _WIRE[f.type], len(a)), body]).where(present)

    def value(self, f: FieldDescriptor, spark, a: pa.Array, active, rows, path: str) -> Ragged:
        """The field's values without tag (a length first for length-delimited ones)."""
        t = f.type
        if t == F.TYPE_MESSAGE:
            m = f.message_type
            if protobuf_types.is_time(m, "Timestamp") or protobuf_types.is_time(m, "Duration"):
                return _with_length(self.time(f, spark, a, path))
            return _with_length(self.message(m, spark, a, active, rows, path))
        if t in (F.TYPE_STRING, F.TYPE_BYTES):
            if not isinstance(spark, (T.StringType, T.BinaryType)) or (
                    t == F.TYPE_STRING and not isinstance(spark, T.StringType)):
                raise _refuse(path, f, spark, "string" if t == F.TYPE_STRING else "binary or string")
            return _with_length(ragged.of_binary(a))
        if t == F.TYPE_BOOL:
            if not isinstance(spark, T.BooleanType):
                raise _refuse(path, f, spark, "boolean")
            return ragged.fixed(ragged.numbers(a, np.uint8)[:, None])
        if t == F.TYPE_ENUM:
            if not isinstance(spark, T.StringType):
                raise _refuse(path, f, spark, "string (a value's name)")
            names = [v.name for v in f.enum_type.values]
            index = pc.index_in(a, value_set=pa.array(names, pa.string()))
            self.mark(active & ~ragged.valid(index), rows,
                      lambda i: f"{path} is {str(a[i].as_py())[:100]!r}, not a value of enum "
                                f"{f.enum_type.full_name}")
            numbers = np.array([v.number for v in f.enum_type.values], np.int64)
            return ragged.varints(numbers[ragged.numbers(index, np.int64)].view(np.uint64))
        if t in (F.TYPE_FLOAT, F.TYPE_DOUBLE):
            allowed = (T.FloatType,) if t == F.TYPE_FLOAT else (T.FloatType, T.DoubleType, *_SMALL,
                                                                 T.LongType)
            if not isinstance(spark, allowed):
                raise _refuse(path, f, spark, "float" if t == F.TYPE_FLOAT else "a number")
            return ragged.little_endian(ragged.numbers(a, np.float32 if t == F.TYPE_FLOAT else np.float64))
        if not isinstance(spark, (*_SMALL, T.LongType)):
            raise _refuse(path, f, spark, "byte, short, int or long")
        values = ragged.numbers(a, np.int64)
        if t in _INT32:
            low, high = (0, 2**32 - 1) if t in (F.TYPE_UINT32, F.TYPE_FIXED32) else (-(2**31), 2**31 - 1)
            if t in (F.TYPE_UINT32, F.TYPE_FIXED32) and not isinstance(spark, T.LongType):
                values = values & 0xFFFFFFFF  # an int's bits: above the signed range negative, as read
            self.mark(active & ((values < low) | (values > high)), rows,
                      lambda i: f"{path} is {values[i]}, outside the range of {_TYPE_NAMES[t]}")
        if t in (F.TYPE_SINT32, F.TYPE_SINT64):
            return ragged.varints(ragged.zigzag(values))
        if t in (F.TYPE_FIXED32, F.TYPE_SFIXED32):
            return ragged.little_endian(values.astype(np.uint32 if t == F.TYPE_FIXED32 else np.int32))
        if t in (F.TYPE_FIXED64, F.TYPE_SFIXED64):
            return ragged.little_endian(values)
        return ragged.varints(values.view(np.uint64))  # a negative int32 takes 10 bytes, as Google's

    def time(self, f: FieldDescriptor, spark, a: pa.Array, path: str) -> Ragged:
        """A ``Timestamp`` or ``Duration``: seconds and nanos, each left out when zero."""
        duration = protobuf_types.is_time(f.message_type, "Duration")
        wanted = (T.DayTimeIntervalType,) if duration else (T.TimestampType, T.TimestampNTZType)
        if not isinstance(spark, wanted):
            raise _refuse(path, f, spark, "a day-time interval" if duration else "timestamp")
        micros = ragged.numbers(a, np.int64)
        if duration:  # seconds and nanos share the sign
            seconds = np.sign(micros) * (np.abs(micros) // MICROS)
        else:
            seconds = np.floor_divide(micros, MICROS)
        nanos = (micros - seconds * MICROS) * 1000
        n = len(a)
        seconds_part = ragged.concat([ragged.constant(b"\x08", n), ragged.varints(seconds.view(np.uint64))])
        nanos_part = ragged.concat([ragged.constant(b"\x10", n), ragged.varints(nanos.view(np.uint64))])
        return ragged.concat([seconds_part.where(seconds != 0), nanos_part.where(nanos != 0)])
