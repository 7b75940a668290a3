"""Spark columns → JSON documents of a JSON Schema, a column at a time: what the jetkafka sink
writes with ``value.format=json-schema`` (and ``key.format=json-schema``).

The inverse of :mod:`jetspark.schemas.json_schema_types`: a struct is an object whose columns
are the schema's properties by name (case-insensitive when unique); a column that is no
property is refused at planning (a reader of the schema would not know it), and so is a
``required`` property without a column. ``string`` takes a string, ``date-time`` a timestamp
(ISO 8601 in UTC, ``Z``), ``date`` a date, ``integer`` byte to long, ``number`` any number or
decimal, ``boolean`` a boolean, ``array`` an array, ``object`` a struct. A null is left out of
its object, as Spark's ``to_json`` leaves it; text is built with Arrow's casts and numpy joins,
no Python call per row.

A row that does not fit — a null in a ``required`` property, a null element where the items
are not nullable, a string outside the property's ``enum``, a NaN or infinite number (JSON has
none) — is unfit: :meth:`JsonEncoder.encode` says why, per row, and the sink applies
``onRejected``. A null value stays null (a tombstone).
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
from jetspark.schemas.avro_program import _arrow
from jetspark.schemas.json_schema_types import LOCAL_REFS, JsonSchemaError, implied_type, is_null, parse
from jetspark.schemas.ragged import Ragged

_INTS = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_NUMBERS = (*_INTS, T.FloatType, T.DoubleType, T.DecimalType)
_ESCAPES = [("\\", "\\\\"), ('"', '\\"')] + [(chr(c), f"\\u{c:04x}") for c in range(32)]


@dataclass(frozen=True)
class JsonEncoder:
    """Encodes a column of ``spark`` type as documents of the JSON Schema ``schema_text``."""

    schema_text: str
    spark: T.DataType
    column: str = "value"

    @functools.cached_property
    def _document(self) -> Mapping:
        return parse(self.schema_text)

    def encode(self, values: pa.Array) -> tuple[pa.BinaryArray, dict[int, str]]:
        """Each value's JSON document (null where the value is null), and why each unfit row
        does not fit (by row; its payload is not to be written)."""
        valid = ragged.valid(values)
        unfit: dict[int, str] = {}
        text = _Encoding(unfit, self._document).encode(self._document, self.spark, values, valid, None,
                                                        self.column)
        return text.where(valid).to_arrow(valid), unfit


def json_encoder(schema_text: str, spark: T.DataType, column: str = "value") -> JsonEncoder:
    """The encoder of a ``spark`` column with the JSON Schema; raises JsonSchemaError naming
    the field when the type does not fit it."""
    encoder = JsonEncoder(schema_text, spark, column)
    encoder.encode(pa.array([], _arrow(spark)))  # every field's fit is checked, whatever the rows
    return encoder


def _text(raw: str, n: int) -> Ragged:
    return ragged.constant(raw.encode(), n)


def _strings(a: pa.Array) -> Ragged:
    """A string column as JSON strings: quoted, escaped."""
    a = a.cast(pa.string()) if not pa.types.is_string(a.type) else a
    if len(a) and pc.any(pc.match_substring_regex(a, r'[\\"\x00-\x1f]')).as_py():
        for plain, escaped in _ESCAPES:
            a = pc.replace_substring(a, plain, escaped)
    quote = _text('"', len(a))
    return ragged.concat([quote, ragged.of_binary(a), quote])


def _joined(items: Ragged, offsets: np.ndarray, open_: str, close: str, present: np.ndarray) -> Ragged:
    """Row ``i``: the items ``offsets[i]`` … (each with a leading comma) in brackets, the first
    comma dropped."""
    n = len(offsets) - 1
    inner = ragged.lists(items, offsets)
    return ragged.concat([_text(open_, n), ragged.drop_first(inner), _text(close, n)]).where(present)


class _Encoding(ragged.UnfitRows):
    """One column's encoding, and the unfit rows found on the way."""

    def __init__(self, unfit: dict[int, str], document: Mapping) -> None:
        super().__init__(unfit)
        self.document = document

    def resolve(self, node: object, path: str) -> tuple[Mapping, bool]:
        """The schema behind ``$ref``s and a nullable ``oneOf``/``anyOf``/type list, and whether
        it takes null."""
        nullable = False
        for _ in range(64):
            if not isinstance(node, Mapping):
                raise JsonSchemaError(f"{path}: a schema is a JSON object")
            if "$ref" in node:
                ref = node["$ref"]
                prefix = next((p for p in LOCAL_REFS if isinstance(ref, str) and ref.startswith(p)), None)
                target = self.document.get(prefix[2:-1], {}).get(ref[len(prefix):]) if prefix else None
                if target is None:
                    raise JsonSchemaError(f"{path}: $ref {ref!r} names nothing in the schema")
                node = target
                continue
            branches = node.get("oneOf", node.get("anyOf"))
            if isinstance(branches, list):
                nullable |= any(is_null(b) for b in branches)
                kept = [b for b in branches if not is_null(b)]
                if len(kept) != 1:
                    raise JsonSchemaError(f"{path}: oneOf/anyOf is supported for one schema and null only")
                node = kept[0]
                continue
            return node, nullable or (isinstance(node.get("type"), list) and "null" in node["type"])
        raise JsonSchemaError(f"{path}: $ref nests too deep")

    def encode(self, node: object, spark, a: pa.Array, active, rows, path: str) -> Ragged:
        node, _nullable = self.resolve(node, path)
        kind = node.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), None)
        kind = kind or implied_type(node, path)
        active = active & ragged.valid(a)
        if kind == "object":
            return self.object(node, spark, a, active, rows, path)
        if kind == "array":
            return self.array(node, spark, a, active, rows, path)
        return self.scalar(node, kind, spark, a, active, rows, path)

    def object(self, node: Mapping, spark, a, active, rows, path: str) -> Ragged:
        if not isinstance(spark, T.StructType):
            raise _refuse(path, "object", spark, "struct")
        properties = node.get("properties") or {}
        required = set(node.get("required") or ())
        names = list(properties)
        folded: dict[str, list[str]] = {}
        for name in names:
            folded.setdefault(name.lower(), []).append(name)
        children = a.flatten()
        parts, lost, given = [], [], set()
        for column, child in zip(spark.fields, children, strict=True):
            name = column.name if column.name in properties else (
                folded[column.name.lower()][0] if len(folded.get(column.name.lower(), ())) == 1 else None)
            if name is None:
                lost.append(column.name)
                continue
            given.add(name)
            present = active & ragged.valid(child)
            if name in required:
                self.mark(active & ~ragged.valid(child), rows,
                          lambda _i, name=name: f"{path}.{name} is null; the schema requires it")
            value = self.encode(properties[name], column.dataType, child, present, rows, f"{path}.{name}")
            parts.append(ragged.concat([_text(f",{json.dumps(name)}:", len(a)), value]).where(present))
        if lost:
            raise JsonSchemaError(f"{path} has field(s) {', '.join(map(repr, lost))} that the schema's "
                                  f"properties lack (they would be lost): drop them, or write with a schema "
                                  f"that has them")
        missing = sorted(required - given)
        if missing:
            raise JsonSchemaError(f"{path} has no field {missing[0]!r}, which the schema requires")
        n = len(a)
        body = ragged.concat(parts) if parts else ragged.empty(n)
        return ragged.concat([_text("{", n), ragged.drop_first(body), _text("}", n)])

    def array(self, node: Mapping, spark, a, active, rows, path: str) -> Ragged:
        if not isinstance(spark, T.ArrayType):
            raise _refuse(path, "array", spark, "array")
        offsets = ragged.list_offsets(a)
        item_active, item_rows = ragged.list_items(offsets, len(a.values), active, rows)
        items_node, nullable = self.resolve(node.get("items", {}), f"{path}[]")
        values = a.values
        present = item_active & ragged.valid(values)
        if not nullable:
            self.mark(item_active & ~ragged.valid(values), item_rows,
                      lambda _i: f"{path}[] holds a null; the schema's items are not nullable")
        item = self.encode(items_node, spark.elementType, values, present, item_rows, f"{path}[]")
        size = len(values)
        items = ragged.concat([_text(",", size), ragged.concat([item.where(present),
                                                                 _text("null", size).where(~present)])])
        return _joined(items, offsets, "[", "]", np.ones(len(a), bool))

    def scalar(self, node: Mapping, kind: str, spark, a, active, rows, path: str) -> Ragged:
        fmt = node.get("format") if kind == "string" else None
        if kind == "string" and fmt == "date-time":
            if not isinstance(spark, (T.TimestampType, T.TimestampNTZType)):
                raise _refuse(path, "string (date-time)", spark, "timestamp")
            text = pc.strftime(a.cast(pa.timestamp("us", tz="UTC")), format="%Y-%m-%dT%H:%M:%SZ")
            return _strings(text)
        if kind == "string" and fmt == "date":
            if not isinstance(spark, T.DateType):
                raise _refuse(path, "string (date)", spark, "date")
            return _strings(pc.strftime(a, format="%Y-%m-%d"))
        if kind == "string":
            if not isinstance(spark, T.StringType):
                raise _refuse(path, "string", spark, "string")
            symbols = node.get("enum")
            if isinstance(symbols, list):
                allowed = pa.array([s for s in symbols if isinstance(s, str)], pa.string())
                outside = active & ~np.asarray(pc.fill_null(pc.is_in(a, value_set=allowed), False))
                self.mark(outside, rows, lambda i: f"{path} is {str(a[i].as_py())[:100]!r}, not one of the "
                                                   f"schema's enum")
            return _strings(a)
        if kind == "boolean":
            if not isinstance(spark, T.BooleanType):
                raise _refuse(path, "boolean", spark, "boolean")
            return ragged.of_binary(pc.if_else(pc.fill_null(a, False), "true", "false"))
        if kind in ("integer", "number"):
            if not isinstance(spark, _INTS if kind == "integer" else _NUMBERS):
                accepted = "byte, short, int or long" if kind == "integer" else "a number"
                raise _refuse(path, kind, spark, accepted)
            if isinstance(spark, (T.FloatType, T.DoubleType)):
                finite = np.isfinite(ragged.numbers(a, np.float64))
                self.mark(active & ~finite, rows,
                          lambda i: f"{path} is {a[i].as_py()}, which JSON has no number for")
            return ragged.of_binary(pc.cast(a, pa.string()))
        raise JsonSchemaError(f"{path}: the type {kind!r} is not written")


def _refuse(path: str, kind: str, spark: T.DataType, accepted: str) -> JsonSchemaError:
    return JsonSchemaError(f"{path} is {spark.simpleString()}, which does not fit the schema's {kind}; "
                           f"accepted: {accepted}")
