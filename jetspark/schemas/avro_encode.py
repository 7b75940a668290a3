"""Spark columns → Avro binary, a column at a time: what the jetkafka sink writes with
``value.format=avro`` (and ``key.format=avro``).

:class:`AvroEncoder` holds the writer schema and the Spark type of the column it encodes;
made on the driver, it checks that the type fits the schema (:func:`avro_encoder` raises
:class:`~jetspark.schemas.avro_types.AvroSchemaError` naming the field when not), so a query
that cannot write fails at planning. In a task, :meth:`AvroEncoder.encode` turns a whole Arrow
column into Avro payloads with numpy (:mod:`jetspark.schemas.ragged`), no Python call per row.

How a Spark type fits an Avro type — Spark's own ``to_avro`` rules, with Avro's promotions:

=====================================  ====================================================
Avro                                    Spark column
=====================================  ====================================================
boolean / string / bytes                boolean / string / binary (``bytes`` also string)
int                                     byte, short, int; long (a value outside int: unfit)
``date``                                date
long                                    byte, short, int, long; timestamp (milliseconds)
``timestamp-millis`` / ``-micros``      timestamp or timestamp_ntz
float / double                          float / float, double, byte, short, int, long
enum                                    string (a name not among the symbols: unfit)
fixed                                   binary (of another size: unfit)
``decimal`` on bytes or fixed           decimal of the schema's scale and no more precision
record                                  struct, fields by name (case-insensitive when unique)
array / map                             array / map<string, …>
union of null and one type              that type, nullable
other unions                            struct<member0, member1, …> (``from_avro``'s form:
                                        at most one member set), or a type one branch takes
=====================================  ====================================================

A record field without a column is written with the field's default (no default: refused at
planning), and a struct field without a record field is refused at planning (it would be
lost). A row whose value does not fit — null where the schema has no null, an enum name
unknown, a number out of range, a fixed of another size, two union members set — is *unfit*:
:meth:`AvroEncoder.encode` says why, per row, and the sink applies ``onRejected``. A null
value is not encoded: it stays null (a tombstone), as with Confluent's serializers.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from jetspark.schemas import ragged
from jetspark.schemas.avro_program import _arrow, _constant, _Names
from jetspark.schemas.avro_types import AvroSchemaError, decimal_of, parse, spark_type
from jetspark.schemas.ragged import Ragged

_INTS = (T.ByteType, T.ShortType, T.IntegerType)
_TIMESTAMPS = (T.TimestampType, T.TimestampNTZType)
_MILLIS = ("timestamp-millis", "local-timestamp-millis")
INT_MIN, INT_MAX = -(2**31), 2**31 - 1


@dataclass(frozen=True)
class AvroEncoder:
    """Encodes a column of ``spark`` type with the Avro schema ``schema_text``."""

    schema_text: str
    spark: T.DataType
    column: str = "value"

    @functools.cached_property
    def _schema(self) -> object:
        return _Names().resolve_all(parse(self.schema_text))

    def encode(self, values: pa.Array) -> tuple[pa.BinaryArray, dict[int, str]]:
        """Each value's Avro payload (null where the value is null), and why each unfit row
        does not fit (by row; its payload is not to be written)."""
        valid = ragged.valid(values)
        unfit: dict[int, str] = {}
        pieces = _Encoding(unfit).encode(self._schema, self.spark, values, valid, None, self.column)
        return _joined(pieces, len(values)).where(valid).to_arrow(valid), unfit


def avro_encoder(schema_text: str, spark: T.DataType, column: str = "value") -> AvroEncoder:
    """The encoder of a ``spark`` column with ``schema_text``; raises AvroSchemaError naming
    the field when the type does not fit the schema."""
    encoder = AvroEncoder(schema_text, spark, column)
    try:
        encoder.encode(pa.array([], _arrow(spark)))  # every field's fit is checked, whatever the rows
    except (KeyError, TypeError, ValueError) as e:
        raise AvroSchemaError(f"not an Avro schema: {type(e).__name__} {e}") from None
    return encoder


def _describe(s: object) -> str:
    if isinstance(s, str):
        return s
    if isinstance(s, list):
        return "union [" + ", ".join(_describe(b) for b in s) + "]"
    name = s.get("_full")
    logical = s.get("logicalType")
    return f"{s['type']} {name}" if name else f"{s['type']} ({logical})" if logical else str(s["type"])


def _refuse(path: str, s: object, spark: T.DataType, accepted: str = "") -> AvroSchemaError:
    more = f"; accepted: {accepted}" if accepted else ""
    return AvroSchemaError(f"{path} is {spark.simpleString()}, which does not fit the schema's "
                           f"{_describe(s)}{more}")


class _Encoding(ragged.UnfitRows):
    """One column's encoding, and the unfit rows found on the way."""

    def encode(self, s: object, spark: T.DataType, a: pa.Array, active: np.ndarray,
               rows: np.ndarray | None, path: str) -> list[Ragged]:
        """``a``'s values in schema ``s``, as pieces: row ``i``'s bytes are row ``i`` of every
        piece, joined once at the end (a record's fields are not copied into the record, then
        into its parent). Only the ``active`` rows are written (the others: below a null,
        outside a list). ``rows``: the column's row of each (None: the same)."""
        if isinstance(s, list):
            return self.union(s, spark, a, active, rows, path)
        kind = s if isinstance(s, str) else s["type"]
        valid = ragged.valid(a)
        if kind != "null":
            self.mark(active & ~valid, rows, lambda _i: f"{path} is null; the schema's {_describe(s)} "
                                                        f"is not nullable")
        active = active & valid
        method = (self.decimal if isinstance(s, Mapping) and decimal_of(s) is not None
                  else getattr(self, "t_" + kind, None))
        if method is None:
            raise AvroSchemaError(f"{path}: the schema's {_describe(s)} is not an Avro type jetspark writes")
        out = method(s, spark, a, active, rows, path)
        return out if isinstance(out, list) else [out]

    # -- primitives ----------------------------------------------------------------------------
    def t_null(self, s, spark, a, active, rows, path) -> list[Ragged]:
        if not isinstance(spark, T.NullType):
            self.mark(active & ragged.valid(a), rows,
                      lambda _i: f"{path} holds a value; the schema's type is null")
        return []

    def t_boolean(self, s, spark, a, active, rows, path) -> Ragged:
        if not isinstance(spark, T.BooleanType):
            raise _refuse(path, s, spark, "boolean")
        return ragged.fixed(ragged.numbers(a, np.uint8)[:, None])

    def t_int(self, s, spark, a, active, rows, path) -> Ragged:
        date = isinstance(s, Mapping) and s.get("logicalType") == "date"
        if date != isinstance(spark, T.DateType) or not isinstance(spark, (*_INTS, T.LongType, T.DateType)):
            raise _refuse(path, s, spark, "date" if date else "byte, short, int or long (in int's range)")
        values = ragged.numbers(a, np.int64)
        outside = active & ((values < INT_MIN) | (values > INT_MAX))
        self.mark(outside, rows, lambda i: f"{path} is {values[i]}, outside the range of Avro's int")
        return ragged.varints(ragged.zigzag(values))

    def t_long(self, s, spark, a, active, rows, path) -> Ragged:
        values = ragged.numbers(a, np.int64)
        if isinstance(spark, _TIMESTAMPS):
            logical = s.get("logicalType") if isinstance(s, Mapping) else None
            if logical not in ("timestamp-micros", "local-timestamp-micros"):
                values = np.floor_divide(values, 1000)  # milliseconds, as Spark writes a plain long
        elif not isinstance(spark, (*_INTS, T.LongType)):
            raise _refuse(path, s, spark, "byte, short, int, long or timestamp")
        return ragged.varints(ragged.zigzag(values))

    def t_float(self, s, spark, a, active, rows, path) -> Ragged:
        if not isinstance(spark, T.FloatType):
            raise _refuse(path, s, spark, "float")
        return ragged.little_endian(ragged.numbers(a, np.float32))

    def t_double(self, s, spark, a, active, rows, path) -> Ragged:
        if not isinstance(spark, (T.FloatType, T.DoubleType, *_INTS, T.LongType)):
            raise _refuse(path, s, spark, "float, double, byte, short, int or long")
        return ragged.little_endian(ragged.numbers(a, np.float64))

    def t_string(self, s, spark, a, active, rows, path) -> list[Ragged]:
        if not isinstance(spark, T.StringType):
            raise _refuse(path, s, spark, "string")
        return _with_length(ragged.of_binary(a))

    def t_bytes(self, s, spark, a, active, rows, path) -> list[Ragged]:
        if not isinstance(spark, (T.BinaryType, T.StringType)):
            raise _refuse(path, s, spark, "binary or string")
        return _with_length(ragged.of_binary(a))

    def t_enum(self, s, spark, a, active, rows, path) -> Ragged:
        if not isinstance(spark, T.StringType):
            raise _refuse(path, s, spark, "string (a symbol's name)")
        symbols = list(s["symbols"])
        index = pc.index_in(a, value_set=pa.array(symbols, pa.string()))
        unknown = active & ~ragged.valid(index)
        shown = ", ".join(symbols[:8]) + (", …" if len(symbols) > 8 else "")
        self.mark(unknown, rows, lambda i: f"{path} is {str(a[i].as_py())[:100]!r}, not a symbol of "
                                           f"enum {s['_full']} ({shown})")
        return ragged.varints(ragged.zigzag(ragged.numbers(index, np.int64)))

    def t_fixed(self, s, spark, a, active, rows, path) -> Ragged:
        if not isinstance(spark, T.BinaryType):
            raise _refuse(path, s, spark, "binary")
        raw = ragged.of_binary(a)
        size = int(s["size"])
        lengths = raw.lengths
        self.mark(active & (lengths != size), rows,
                  lambda i: f"{path} is {lengths[i]} bytes; fixed {s['_full']} holds {size}")
        return raw

    def decimal(self, s, spark, a, active, rows, path) -> Ragged | list[Ragged]:
        precision, scale = decimal_of(s)
        if not isinstance(spark, T.DecimalType) or spark.scale != scale or spark.precision > precision:
            raise _refuse(path, s, spark, f"decimal with scale {scale} and precision at most {precision} "
                                          f"(cast the column)")
        big_endian = _decimal_bytes(a)
        if s["type"] == "fixed":
            size = int(s["size"])
            sign = np.where(big_endian[:, :1] >= 0x80, np.uint8(0xFF), np.uint8(0))
            wide = np.concatenate([np.repeat(sign, max(0, size - 16), axis=1), big_endian], axis=1)
            return ragged.fixed(wide[:, wide.shape[1] - size:])  # a precision that fits, fits its size
        sign = big_endian[:, 0] >= 0x80
        fill = np.where(sign, 0xFF, 0)[:, None]
        redundant = (big_endian[:, :-1] == fill) & ((big_endian[:, 1:] >= 0x80) == sign[:, None])
        skip = np.cumprod(redundant, axis=1).sum(axis=1)  # leading bytes the sign repeats
        body = big_endian[np.arange(16)[None, :] >= skip[:, None]]
        return _with_length(Ragged(ragged._offsets(16 - skip), body))

    # -- complex -------------------------------------------------------------------------------
    def t_record(self, s, spark, a, active, rows, path) -> list[Ragged]:
        if not isinstance(spark, T.StructType):
            raise _refuse(path, s, spark, "struct")
        children = a.flatten()
        names = [f.name for f in spark.fields]
        folded: dict[str, list[int]] = {}
        for j, name in enumerate(names):
            folded.setdefault(name.lower(), []).append(j)
        used: set[int] = set()
        parts: list[Ragged] = []
        for field in s.get("fields", ()):
            name = field["name"]
            j = names.index(name) if name in names else (
                folded[name.lower()][0] if len(folded.get(name.lower(), ())) == 1 else None)
            if j is None:
                if "default" not in field:
                    raise AvroSchemaError(f"{path} has no field {name!r}, and the schema's record "
                                          f"{s['_full']} gives it no default")
                parts.append(ragged.constant(self.default(field, f"{path}.{name}"), len(a)))
                continue
            used.add(j)
            parts += self.encode(field["type"], spark.fields[j].dataType, children[j], active, rows,
                                 f"{path}.{name}")
        extra = [names[j] for j in range(len(names)) if j not in used]
        if extra:
            raise AvroSchemaError(f"{path} has field(s) {', '.join(map(repr, extra))} that the schema's "
                                  f"record {s['_full']} lacks (they would be lost): drop them, or write "
                                  f"with a schema that has them")
        return parts

    t_error = t_record

    def default(self, field: Mapping, path: str) -> bytes:
        """A record field's default, encoded."""
        data_type, _ = spark_type(field["type"])
        value = _constant(field["default"], _arrow(data_type), 1)
        out = _Encoding({}).encode(field["type"], data_type, value, np.ones(1, bool), None, path)
        return _joined(out, 1).body.tobytes()

    def t_array(self, s, spark, a, active, rows, path) -> list[Ragged]:
        if not isinstance(spark, T.ArrayType):
            raise _refuse(path, s, spark, "array")
        offsets = ragged.list_offsets(a)
        item_active, item_rows = ragged.list_items(offsets, len(a.values), active, rows)
        items = self.encode(s["items"], spark.elementType, a.values, item_active, item_rows, f"{path}[]")
        return _blocks(_joined(items, len(a.values)), offsets, active)

    def t_map(self, s, spark, a, active, rows, path) -> list[Ragged]:
        if not isinstance(spark, T.MapType) or not isinstance(spark.keyType, T.StringType):
            raise _refuse(path, s, spark, "map<string, …>")
        offsets = ragged.list_offsets(a)
        item_active, item_rows = ragged.list_items(offsets, len(a.keys), active, rows)
        values = self.encode(s["values"], spark.valueType, a.items, item_active, item_rows, f"{path}{{}}")
        entries = ragged.concat([*_with_length(ragged.of_binary(a.keys)), *values])
        return _blocks(entries, offsets, active)

    def union(self, branches: list, spark, a, active, rows, path) -> list[Ragged]:
        null_at = next((i for i, b in enumerate(branches) if _is_null(b)), None)
        others = [i for i, b in enumerate(branches) if not _is_null(b)]
        valid = ragged.valid(a)
        if len(others) > 1 and isinstance(spark, T.StructType) and (
                [f.name for f in spark.fields] == [f"member{j}" for j in range(len(others))]):
            return self.members(branches, others, null_at, spark, a, active, rows, path)
        if not others:
            return self.encode("null", spark, a, active, rows, path)
        branch = others[0] if len(others) == 1 else self.branch_for(branches, others, spark, path)
        if null_at is None:
            value = self.encode(branches[branch], spark, a, active, rows, path)
            return [ragged.constant(_varint(branch), len(a)), *value]
        value = self.encode(branches[branch], spark, a, active & valid, rows, path)
        index = np.where(valid, branch, null_at)
        return [ragged.varints(ragged.zigzag(index)), *(p.where(valid) for p in value)]

    def branch_for(self, branches: list, others: list[int], spark, path: str) -> int:
        """The branch a plain Spark type goes to: the first that takes it (its own Avro type first)."""
        natural = {T.LongType: "long", T.IntegerType: "int", T.DoubleType: "double", T.FloatType: "float",
                   T.StringType: "string", T.BinaryType: "bytes", T.BooleanType: "boolean"}.get(type(spark))
        ordered = sorted(others, key=lambda i: _kind(branches[i]) != natural)
        for i in ordered:
            try:
                _Encoding({}).encode(branches[i], spark, pa.array([], _arrow(spark)), np.zeros(0, bool),
                                     None, path)
                return i
            except AvroSchemaError:
                continue
        raise _refuse(path, branches, spark)

    def members(self, branches, others, null_at, spark, a, active, rows, path) -> list[Ragged]:
        """A union written from ``from_avro``'s struct of members: the member that is set."""
        n = len(a)
        valid = ragged.valid(a)
        members = a.flatten()
        present = (np.stack([valid & ragged.valid(m) for m in members]) if n
                   else np.zeros((len(others), 0), bool))
        count = present.sum(axis=0)
        chosen = np.argmax(present, axis=0)
        self.mark(active & (count > 1), rows, lambda i: f"{path} sets members "
                  f"{', '.join(str(j) for j in np.flatnonzero(present[:, i]))} of a union; one at most")
        if null_at is None:
            self.mark(active & (count == 0), rows, lambda _i: f"{path} sets no member; the schema's "
                                                               f"union has no null")
        parts: list[Ragged] = []
        for j, (field, m) in enumerate(zip(spark.fields, members, strict=True)):
            mine = (count > 0) & (chosen == j)
            pieces = self.encode(branches[others[j]], field.dataType, m, active & mine, rows,
                                 f"{path}.member{j}")
            parts += (p.where(mine) for p in pieces)
        index = np.where(count > 0, np.asarray(others)[chosen] if n else chosen,
                         null_at if null_at is not None else 0)
        return [ragged.varints(ragged.zigzag(index)), *parts]


def _is_null(s: object) -> bool:
    return s == "null" or (isinstance(s, Mapping) and s.get("type") == "null")


def _kind(s: object) -> str:
    return s if isinstance(s, str) else "union" if isinstance(s, list) else str(s.get("type"))


def _varint(value: int) -> bytes:
    return ragged.varints(ragged.zigzag(np.array([value]))).body.tobytes()


def _with_length(raw: Ragged) -> list[Ragged]:
    """Bytes behind their length (Avro's string and bytes)."""
    return [ragged.varints(ragged.zigzag(raw.lengths)), raw]


def _joined(pieces: list[Ragged], n: int) -> Ragged:
    """The pieces joined row by row (no piece: ``n`` empty rows)."""
    return ragged.concat(pieces) if pieces else ragged.empty(n)


def _decimal_bytes(a: pa.Array) -> np.ndarray:
    """Each decimal's unscaled value as 16 big-endian two's complement bytes (nulls: zero)."""
    if not pa.types.is_decimal128(a.type):
        a = a.cast(pa.decimal128(38, a.type.scale))
    if a.null_count:
        a = a.fill_null(pa.scalar(0, a.type))
    n = len(a)
    data = np.frombuffer(a.buffers()[1], np.uint8, 16 * n, 16 * a.offset) if n else np.zeros(0, np.uint8)
    return data.reshape(n, 16)[:, ::-1]


def _blocks(items: Ragged, offsets: np.ndarray, active: np.ndarray) -> list[Ragged]:
    """Avro's array or map: one block of the items (its count first) and the end (0); an empty
    one is the end alone."""
    count = np.where(active, np.diff(offsets), 0)
    n = len(count)
    present = count > 0
    return [ragged.varints(ragged.zigzag(count)).where(present), ragged.lists(items, offsets).where(present),
            ragged.constant(b"\x00", n)]


# -- a schema for a Spark type ----------------------------------------------------------------------

def schema_of(spark: T.DataType, name: str = "topLevelRecord", namespace: str = "") -> dict | str | list:
    """The Avro schema the sink registers for a column of ``spark`` type when asked to and given
    none: Spark's ``to_avro`` schema (records named after their fields, in the parent's
    namespace) with a nullable field written ``["null", type]`` and default null, so that a
    later reader's field of it can be missing."""
    def nullable(t: T.DataType, null: bool, field_name: str, inner: str) -> object:
        schema = schema_of(t, field_name, inner)
        return ["null", schema] if null and not isinstance(t, T.NullType) else schema

    if isinstance(spark, T.StructType):
        inner = f"{namespace}.{name}" if namespace else name
        fields = []
        for f in spark.fields:
            field: dict = {"name": f.name, "type": nullable(f.dataType, f.nullable, f.name, inner)}
            if f.nullable:
                field["default"] = None
            fields.append(field)
        out = {"type": "record", "name": name, "fields": fields}
        return {**out, "namespace": namespace} if namespace else out
    if isinstance(spark, T.ArrayType):
        return {"type": "array", "items": nullable(spark.elementType, spark.containsNull, name, namespace)}
    if isinstance(spark, T.MapType):
        if not isinstance(spark.keyType, T.StringType):
            raise AvroSchemaError(f"{spark.simpleString()} has no Avro schema: Avro's map keys are strings")
        return {"type": "map", "values": nullable(spark.valueType, spark.valueContainsNull, name, namespace)}
    if isinstance(spark, T.DecimalType):
        return {"type": "bytes", "logicalType": "decimal", "precision": spark.precision, "scale": spark.scale}
    simple = {T.BooleanType: "boolean", T.ByteType: "int", T.ShortType: "int", T.IntegerType: "int",
              T.LongType: "long", T.FloatType: "float", T.DoubleType: "double", T.StringType: "string",
              T.BinaryType: "bytes", T.NullType: "null"}.get(type(spark))
    if simple is not None:
        return simple
    logical = {T.DateType: ("int", "date"), T.TimestampType: ("long", "timestamp-micros"),
               T.TimestampNTZType: ("long", "local-timestamp-micros")}.get(type(spark))
    if logical is not None:
        return {"type": logical[0], "logicalType": logical[1]}
    raise AvroSchemaError(f"{spark.simpleString()} has no Avro schema jetspark writes")


def schema_text_of(spark: T.DataType) -> str:
    """:func:`schema_of` as JSON text."""
    return json.dumps(schema_of(spark), separators=(",", ":"))
