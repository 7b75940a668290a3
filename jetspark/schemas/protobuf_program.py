"""Protobuf messages decoded a column at a time: a message descriptor is compiled into a
program the native decoder (``_protobuf_arrow.c``) runs over every payload; its buffers
become one Arrow struct array of the message's Spark type (:mod:`jetspark.schemas.protobuf_types`).

Protobuf resolves schemas by field number, so the reader's message decodes records of any writer
version of it: a field the reader lacks is skipped, a field the writer lacks is absent, a field
whose wire type is not the reader's type's is skipped in a nested message (as protobuf keeps it
as an unknown field; in the root message it is malformed, below). As in Spark's
``from_protobuf``: an absent field is null — for a field without presence (proto3's plain
scalars and enums) its default value is absent on the wire, so it is null too —, but an absent
field that declares a default (proto2's ``[default = …]``) is that default, filled in a column
at a time after decoding (:func:`_with_default`); an absent repeated field is an empty array, an
absent map an empty map, and a map entry's missing key or value is its default. A number an open
(proto3) enum does not name reads ``UNKNOWN_ENUM_VALUE_<Enum>_<number>``, as Java's protobuf
names it; one a closed (proto2) enum does not define is an unknown field, as protobuf keeps it:
below the root message the field is absent (an array leaves it out, a map value is the enum's
first value). Of a oneof's members, the last on the wire is set.

A record that does not decode (cut short, a varint over 10 bytes, a wire type 6 or 7, an
unbalanced group, a length beyond its message, nested deeper than 100), or that ``from_protobuf``
fails — a required field missing; the root message keeping an unknown field of one of its
numbers (another wire type, a number its closed enum lacks) — is a null row with an error code
(:data:`ERRORS`); the caller applies the malformed-record policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from pyspark.sql import types as T

from jetspark.schemas.protobuf_types import default_value, is_closed_enum, is_map, is_time, spark_type

# the program's words (keep in step with _protobuf_arrow.c)
K_INT32, K_INT64, K_UINT32, K_UINT64, K_SINT32, K_SINT64, K_BOOL, K_ENUM = range(8)
K_FIXED32, K_FIXED64, K_FLOAT, K_DOUBLE, K_BYTES, K_MESSAGE, K_TIMESTAMP, K_LIST = range(8, 16)
F_STORE, F_IMPLICIT, F_DEFAULT, F_REQUIRED = 1, 2, 4, 8
ONEOF_SHIFT = 8  # a oneof member's flags hold its oneof's index plus one from this bit up

ERRORS = {1: "the payload ends inside a value", 2: "a varint runs past 10 bytes",
          3: "an invalid wire type or an unbalanced group", 4: "a length out of range",
          5: "out of memory", 6: "messages nested deeper than 100",
          7: "a field of the message holds what its type cannot (another wire type, or a number "
             "its enum does not define)",
          8: "a required field is missing",
          9: "the record decodes to more than 64 MiB of columns (e.g. many empty repeated elements)",
          10: "a google.protobuf.Timestamp or Duration past Spark's range (its microseconds overflow "
              "64 bits)"}
"""The decoder's error codes: why a record did not decode."""

_KIND = {FieldDescriptor.TYPE_INT32: K_INT32, FieldDescriptor.TYPE_INT64: K_INT64,
         FieldDescriptor.TYPE_UINT32: K_UINT32, FieldDescriptor.TYPE_UINT64: K_UINT64,
         FieldDescriptor.TYPE_SINT32: K_SINT32, FieldDescriptor.TYPE_SINT64: K_SINT64,
         FieldDescriptor.TYPE_BOOL: K_BOOL, FieldDescriptor.TYPE_ENUM: K_ENUM,
         FieldDescriptor.TYPE_FIXED32: K_FIXED32, FieldDescriptor.TYPE_SFIXED32: K_FIXED32,
         FieldDescriptor.TYPE_FIXED64: K_FIXED64, FieldDescriptor.TYPE_SFIXED64: K_FIXED64,
         FieldDescriptor.TYPE_FLOAT: K_FLOAT, FieldDescriptor.TYPE_DOUBLE: K_DOUBLE,
         FieldDescriptor.TYPE_STRING: K_BYTES, FieldDescriptor.TYPE_BYTES: K_BYTES}
_STORED = {K_INT32: pa.int32(), K_UINT32: pa.int32(), K_SINT32: pa.int32(), K_FIXED32: pa.int32(),
           K_INT64: pa.int64(), K_UINT64: pa.int64(), K_SINT64: pa.int64(), K_FIXED64: pa.int64(),
           K_FLOAT: pa.float32(), K_DOUBLE: pa.float64()}


@dataclass
class _Node:
    """One node of the program, and how its buffers become an Arrow array."""

    kind: int
    number: int
    flags: int
    spark: T.DataType
    children: list[_Node] = field(default_factory=list)
    enum: tuple[str, dict[int, str]] | None = None  # enums: the type's name, and names by number
    default: object | None = None  # a singular field's declared default (proto2), as Spark holds it
    closed: tuple[int, ...] = ()  # a closed (proto2) enum: the numbers it defines; () open
    first: int = 0  # enums: the number of the enum's first value (an absent map value's)

    def words(self) -> list[int]:
        out = [self.kind, self.number, self.flags, len(self.children)]
        if self.kind == K_ENUM:
            out += [self.first, len(self.closed), *self.closed]
        for child in self.children:
            out += child.words()
        return out


@dataclass(frozen=True)
class Program:
    """A compiled message: the words the decoder runs and the Arrow type out."""

    words: bytes
    root: _Node
    arrow_type: pa.DataType
    full_name: str


def compile_program(message: Descriptor) -> Program:
    """The program that decodes records of ``message`` into its Spark type."""
    spark = spark_type(message)
    root = _message(message, spark, 0, F_STORE, root=True)
    return Program(np.array(root.words(), np.int32).tobytes(), root, _arrow(spark), message.full_name)


def decode(program: Program, starts: np.ndarray, ends: np.ndarray, data: np.ndarray
           ) -> tuple[pa.Array, np.ndarray]:
    """The messages ``data[starts[i]:ends[i]]`` as one struct array, and each record's error
    code (0: decoded; else a null row, see :data:`ERRORS`)."""
    from jetspark.schemas import _protobuf_arrow

    nodes, errors = _protobuf_arrow.decode(program.words, np.ascontiguousarray(starts, np.int64),
                                           np.ascontiguousarray(ends, np.int64), np.ascontiguousarray(data))
    return _assemble(program.root, iter(nodes)), np.frombuffer(errors, np.uint8)


KEY_OTHER, KEY_BAD = -1, -2
"""Message keys of :func:`message_keys` for indexes it does not pack, and for records cut short."""


def message_keys(starts: np.ndarray, ends: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per record of Confluent's Protobuf framing (``data[starts[i]:ends[i]]`` after the 5-byte
    header): a key of its message indexes (see :func:`indexes_of`; :data:`KEY_BAD` when they
    are cut short) and where its payload starts."""
    from jetspark.schemas import _protobuf_arrow

    keys, payload = _protobuf_arrow.frames(np.ascontiguousarray(starts, np.int64),
                                           np.ascontiguousarray(ends, np.int64), np.ascontiguousarray(data))
    return np.frombuffer(keys, np.int64), np.frombuffer(payload, np.int64)


def indexes_of(key: int) -> tuple[int, ...] | None:
    """The message indexes a key packs (0: the file's first message), None for the others."""
    if key < 0:
        return None
    if key == 0:
        return (0,)
    return tuple((key >> (3 + 15 * i)) & 0x7FFF for i in range(key & 7))


# -- compilation ----------------------------------------------------------------------------------

def _message(d: Descriptor, spark: T.StructType, number: int, flags: int, root: bool = False) -> _Node:
    node = _Node(K_MESSAGE, number, flags, spark)
    kept = set(spark.names)
    for f in d.fields:
        if f.name in kept:
            node.children.append(_field(f, spark[f.name].dataType))
        elif root:  # a field left out (a message without fields): read, not stored, so that the
            # root message still knows its number (another wire type fails the record, as in from_protobuf)
            node.children.append(_Node(K_MESSAGE, f.number, F_REQUIRED if f.is_required else 0,
                                       T.StructType([])))
    return node


def _field(f: FieldDescriptor, spark: T.DataType) -> _Node:
    if is_map(f):
        entry = f.message_type
        key, value = entry.fields_by_name["key"], entry.fields_by_name["value"]
        entry_type = T.StructType([T.StructField("key", spark.keyType),
                                   T.StructField("value", spark.valueType)])
        item = _Node(K_MESSAGE, f.number, F_STORE, entry_type,
                     [_value(key, spark.keyType, F_STORE | F_DEFAULT),
                      _value(value, spark.valueType, F_STORE | F_DEFAULT)])
        return _Node(K_LIST, f.number, F_STORE, spark, [item])
    if f.is_repeated:
        return _Node(K_LIST, f.number, F_STORE, spark, [_value(f, spark.elementType, F_STORE)])
    flags = F_STORE | (0 if f.has_presence else F_IMPLICIT) | (F_REQUIRED if f.is_required else 0)
    if f.containing_oneof is not None and len(f.containing_oneof.fields) > 1:  # not proto3's optional
        flags |= (f.containing_oneof.index + 1) << ONEOF_SHIFT
    node = _value(f, spark, flags)
    node.default = default_value(f)
    return node


def _value(f: FieldDescriptor, spark: T.DataType, flags: int) -> _Node:
    if f.type == FieldDescriptor.TYPE_MESSAGE:
        m = f.message_type
        if is_time(m, "Timestamp") or is_time(m, "Duration"):
            return _Node(K_TIMESTAMP, f.number, flags, spark)
        return _message(m, spark, f.number, flags)
    node = _Node(_KIND[f.type], f.number, flags, spark)
    if f.type == FieldDescriptor.TYPE_ENUM:  # a number with aliases: its first name, as Java finds it
        node.enum = (f.enum_type.name, {v.number: v.name for v in reversed(f.enum_type.values)})
        node.first = f.enum_type.values[0].number
        if is_closed_enum(f):  # proto2's: a number it does not define is an unknown field
            node.closed = tuple(sorted({v.number for v in f.enum_type.values}))
    return node


# -- buffers → Arrow ------------------------------------------------------------------------------

def _validity(raw: bytes) -> pa.Buffer | None:
    flags = np.frombuffer(raw, np.uint8)
    if flags.all():
        return None
    return pa.py_buffer(np.packbits(flags, bitorder="little").tobytes())


def _assemble(node: _Node, nodes) -> pa.Array:
    """The Arrow array of ``node`` from the decoder's buffers (consumed in pre-order)."""
    count, valid, values, offsets, data = next(nodes)
    children = [_assemble(c, nodes) for c in node.children]
    arrow_type = _arrow(node.spark)
    mask = _validity(valid)
    kind = node.kind
    if kind == K_MESSAGE:  # (a child not stored is a field left out)
        children = [_with_default(c, a, mask) for c, a in zip(node.children, children, strict=True)
                    if c.flags & F_STORE]
        return pa.Array.from_buffers(arrow_type, count, [mask], children=children)
    if kind == K_LIST:
        if pa.types.is_map(arrow_type):
            key, item = children[0].field(0), children[0].field(1)
            entries = pa.StructArray.from_arrays([key, item],
                                                 fields=[arrow_type.key_field, arrow_type.item_field])
            return pa.Array.from_buffers(arrow_type, count, [mask, pa.py_buffer(offsets)], children=[entries])
        return pa.Array.from_buffers(arrow_type, count, [mask, pa.py_buffer(offsets)], children=children)
    if kind == K_BYTES:
        return pa.Array.from_buffers(arrow_type, count, [mask, pa.py_buffer(offsets), pa.py_buffer(data)])
    if kind == K_BOOL:
        bits = np.packbits(np.frombuffer(values, np.uint8), bitorder="little").tobytes()
        return pa.Array.from_buffers(pa.bool_(), count, [mask, pa.py_buffer(bits)])
    if kind == K_ENUM:
        return _enum_names(node, np.frombuffer(values, np.int32), mask, count)
    if kind == K_TIMESTAMP:
        return pa.Array.from_buffers(arrow_type, count, [mask, pa.py_buffer(values)])
    return pa.Array.from_buffers(_STORED[kind], count, [mask, pa.py_buffer(values)])


def _with_default(node: _Node, array: pa.Array, present: pa.Buffer | None) -> pa.Array:
    """A field's column with its declared default where its message is present (validity
    ``present``, None: everywhere) and lacks it, as from_protobuf reads such a field."""
    if node.default is None or not array.null_count:
        return array
    default = pa.scalar(node.default, array.type)
    if present is None:
        return pc.fill_null(array, default)
    parent = pa.Array.from_buffers(pa.bool_(), len(array), [None, present])
    return pc.if_else(pc.and_(parent, pc.is_null(array)), default, array)


def _enum_names(node: _Node, numbers: np.ndarray, mask: pa.Buffer | None, count: int) -> pa.Array:
    """Enum numbers as their names (a number the schema lacks: Java protobuf's name for it)."""
    type_name, names = node.enum
    distinct = np.unique(numbers)
    symbols = [names.get(int(n), f"UNKNOWN_ENUM_VALUE_{type_name}_{int(n)}") for n in distinct]
    codes = np.searchsorted(distinct, numbers).astype(np.int32)
    indices = pa.Array.from_buffers(pa.int32(), count, [mask, pa.py_buffer(codes.tobytes())])
    return pa.DictionaryArray.from_arrays(indices, pa.array(symbols, pa.string())).cast(pa.string())


def _arrow(spark: T.DataType) -> pa.DataType:
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(spark, timezone="UTC")  # Spark's timestamps: microseconds in UTC
