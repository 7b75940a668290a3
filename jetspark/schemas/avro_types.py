"""Avro schemas as Spark types, by the rules of Spark's own ``from_avro`` (spark-avro's
``SchemaConverters``), so a jetkafka column has the type ``from_avro`` would give it.

=====================================  ======================================
Avro                                    Spark
=====================================  ======================================
null / boolean / int / long             void / boolean / int / bigint
float / double / string / enum          float / double / string / string
bytes, fixed                            binary
``decimal`` on bytes or fixed           decimal(precision, scale)
``date`` on int                         date
``timestamp-millis``/``-micros``        timestamp
``local-timestamp-millis``/``-micros``  timestamp_ntz
record                                  struct (fields in order)
array / map                             array / map<string, …>
union of null and one type              that type, nullable
union of int and long                   bigint (float and double: double)
other unions                            struct<member0, member1, …>, nullable
=====================================  ======================================

A recursive schema (a record that contains itself) has no Spark type and is refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pyspark.sql import types as T

from jetspark.errors import JetsparkError

_PRIMITIVE = {
    "null": T.NullType(), "boolean": T.BooleanType(), "int": T.IntegerType(), "long": T.LongType(),
    "float": T.FloatType(), "double": T.DoubleType(), "bytes": T.BinaryType(), "string": T.StringType(),
}
_LOGICAL = {
    ("int", "date"): T.DateType(),
    ("long", "timestamp-millis"): T.TimestampType(), ("long", "timestamp-micros"): T.TimestampType(),
    ("long", "local-timestamp-millis"): T.TimestampNTZType(),
    ("long", "local-timestamp-micros"): T.TimestampNTZType(),
}


_COMPLEX = ("record", "error", "enum", "fixed", "array", "map")


class AvroSchemaError(JetsparkError):
    """An Avro schema that is malformed or has no Spark type."""


def parse(text: str | Mapping | list) -> object:
    """An Avro schema from its JSON text (or already parsed JSON)."""
    if not isinstance(text, str):
        return text
    if text.strip() in _PRIMITIVE:  # a bare primitive name ("null" is no JSON null here)
        return text.strip()
    try:
        return json.loads(text)
    except ValueError:
        raise AvroSchemaError(f"not an Avro schema (not JSON): {text[:80]!r}") from None


def spark_type(schema: object) -> tuple[T.DataType, bool]:
    """The Spark type of an Avro schema, and whether it is nullable (a union with null)."""
    try:
        return _Converter().convert(parse(schema), namespace=None)
    except (KeyError, TypeError, ValueError) as e:  # a required attribute missing or malformed
        raise AvroSchemaError(f"not an Avro schema: {type(e).__name__} {e}") from None


def decimal_of(schema: object) -> tuple[int, int] | None:
    """(precision, scale) of a valid ``decimal`` logical type; None when there is none or it is
    invalid (Avro then drops it: the value is the plain bytes or fixed, as Spark reads it)."""
    if not isinstance(schema, Mapping) or schema.get("logicalType") != "decimal":
        return None
    if schema.get("type") not in ("bytes", "fixed"):
        return None
    try:
        precision, scale = int(schema["precision"]), int(schema.get("scale", 0))
    except (KeyError, TypeError, ValueError):
        return None
    if precision <= 0 or scale < 0 or scale > precision:
        return None
    if schema["type"] == "fixed":
        size = int(schema["size"])
        if size <= 0 or precision > len(str(2 ** (8 * size - 1) - 1)) - 1:
            return None
    if precision > MAX_PRECISION:
        raise AvroSchemaError(f"decimal({precision}, {scale}) is wider than Spark's decimals "
                              f"(precision at most {MAX_PRECISION})")
    return precision, scale


MAX_PRECISION = 38

MAX_FIXED_SIZE = 1 << 20
"""The largest ``fixed`` size (1 MiB) read or written: a value is one element of its column."""


def fixed_size(schema: Mapping) -> int:
    """The size of a ``fixed`` type; AvroSchemaError unless it is an integer in (0, 1 MiB]."""
    size = schema.get("size")
    if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= MAX_FIXED_SIZE:
        raise AvroSchemaError(f"the Avro fixed type {schema.get('name')!r} has size {size!r}; accepted: "
                              f"an integer in (0, {MAX_FIXED_SIZE}] (1 MiB)")
    return size


def record_name(schema: object) -> str | None:
    """The full name of a record schema (``namespace.name``), or None for another type."""
    schema = parse(schema)
    if not isinstance(schema, Mapping) or schema.get("type") != "record":
        return None
    return _full_name(schema["name"], schema.get("namespace"))


def _full_name(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


class _Converter:
    def __init__(self) -> None:
        self.named: dict[str, object] = {}
        self.open: set[str] = set()  # records being converted: met again, the schema recurses

    def convert(self, schema: object, namespace: str | None) -> tuple[T.DataType, bool]:
        if isinstance(schema, str):
            if schema in _PRIMITIVE:
                return _PRIMITIVE[schema], schema == "null"
            name = _full_name(schema, namespace)
            name = name if name in self.named else schema
            if name in self.open:
                raise AvroSchemaError(f"the Avro record {name} contains itself: a recursive schema "
                                      "has no Spark type")
            if name not in self.named:
                raise AvroSchemaError(f"the Avro schema names type {schema!r}, which it does not define")
            return self.convert(self.named[name], namespace)
        if isinstance(schema, list):
            return self._union(schema, namespace)
        if not isinstance(schema, Mapping) or "type" not in schema:
            raise AvroSchemaError(f"not an Avro schema: {json.dumps(schema)[:80]}")
        kind = schema["type"]
        if not isinstance(kind, str):  # {"type": {...}} or {"type": [...]}
            return self.convert(kind, namespace)
        logical = schema.get("logicalType")
        if (kind, logical) in _LOGICAL:
            return _LOGICAL[(kind, logical)], False
        decimal = decimal_of(schema)
        if decimal is not None:
            if kind == "fixed":
                self._define(schema, namespace)
            return T.DecimalType(*decimal), False
        if kind in _PRIMITIVE:
            return _PRIMITIVE[kind], kind == "null"
        if kind == "record" or kind == "error":
            return self._record(schema, namespace), False
        if kind == "enum":
            self._define(schema, namespace)
            return T.StringType(), False
        if kind == "fixed":
            fixed_size(schema)
            self._define(schema, namespace)
            return T.BinaryType(), False
        if kind == "array":
            items, null = self.convert(schema["items"], namespace)
            return T.ArrayType(items, containsNull=null), False
        if kind == "map":
            values, null = self.convert(schema["values"], namespace)
            return T.MapType(T.StringType(), values, valueContainsNull=null), False
        return self.convert(kind, namespace)  # {"type": "string"} or {"type": <named or union>}

    def _avro_type(self, schema: object, namespace: str | None) -> str:
        """A branch's Avro type: a primitive's name, or the kind of a complex or named type."""
        if isinstance(schema, str):
            if schema in _PRIMITIVE:
                return schema
            name = _full_name(schema, namespace)
            found = self.named.get(name, self.named.get(schema))
            return self._avro_type(found, namespace) if found is not None else schema
        if isinstance(schema, list):
            return "union"
        kind = schema.get("type")
        if isinstance(kind, str) and (kind in _PRIMITIVE or kind in _COMPLEX):
            return kind
        return self._avro_type(kind, namespace)

    def _define(self, schema: Mapping, namespace: str | None) -> str:
        name = _full_name(schema["name"], schema.get("namespace", namespace))
        self.named[name] = schema
        return name

    def _record(self, schema: Mapping, namespace: str | None) -> T.StructType:
        name = self._define(schema, namespace)
        inner = name.rpartition(".")[0] or None
        self.open.add(name)
        fields = []
        for f in schema.get("fields", ()):
            data_type, null = self.convert(f["type"], inner)
            fields.append(T.StructField(f["name"], data_type, nullable=null))
        self.open.discard(name)
        return T.StructType(fields)

    def _union(self, branches: list, namespace: str | None) -> tuple[T.DataType, bool]:
        has_null = any(map(_is_null, branches))
        rest = [b for b in branches if not _is_null(b)]
        if not rest:
            return T.NullType(), True
        if len(rest) == 1:
            data_type, _ = self.convert(rest[0], namespace)
            return data_type, has_null
        types = [self.convert(b, namespace)[0] for b in rest]
        avro = {self._avro_type(b, namespace) for b in rest}
        if len(rest) == 2 and avro == {"int", "long"}:  # by the Avro types, as Spark (logical types aside)
            return T.LongType(), has_null
        if len(rest) == 2 and avro == {"float", "double"}:
            return T.DoubleType(), has_null
        return T.StructType([T.StructField(f"member{i}", t, True) for i, t in enumerate(types)]), has_null


def _is_null(schema: object) -> bool:
    return schema == "null" or (isinstance(schema, Mapping) and schema.get("type") == "null")
