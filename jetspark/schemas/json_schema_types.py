"""The Spark type of a JSON Schema: what a ``value.format=json-schema`` column holds.

The root is an object; its ``properties`` become a struct's fields, in the schema's order, all
nullable (a JSON document may leave any field out). The rest, as Spark users type JSON:

========================================  ==========================================
JSON Schema                               Spark
========================================  ==========================================
``object`` with ``properties``            struct
``array`` with ``items``                  array
``string``                                string
``string`` + ``format: date-time``        timestamp (ISO 8601 with a zone)
``string`` + ``format: date``             date
``integer``                               bigint
``number``                                double
``boolean``                               boolean
``enum`` / ``const``                      the type of its values
``["T", "null"]``, ``oneOf`` / ``anyOf``  T (null is every field's default anyway)
of T and ``{"type": "null"}``
``$ref`` to ``#/definitions/…`` or
``#/$defs/…``                             the referenced schema's type
========================================  ==========================================

Refused with :class:`JsonSchemaError`, naming the place: a root that is not an object, several
non-null types for one field, ``allOf`` and other ``oneOf``/``anyOf``, a field without a type,
maps (``additionalProperties`` without ``properties``), references outside the document and
recursive ones.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pyspark.sql import types as T

from jetspark.errors import JetsparkError

_SIMPLE = {"string": T.StringType(), "integer": T.LongType(), "number": T.DoubleType(),
           "boolean": T.BooleanType()}
_FORMATS = {"date-time": T.TimestampType(), "date": T.DateType()}
LOCAL_REFS = ("#/definitions/", "#/$defs/")


class JsonSchemaError(JetsparkError):
    """A JSON Schema that Spark cannot type (the message names where in the schema)."""


def parse(text: str | Mapping) -> Mapping:
    """The schema document, from its JSON text."""
    if isinstance(text, Mapping):
        return text
    try:
        document = json.loads(text)
    except ValueError as e:
        raise JsonSchemaError(f"not JSON: {e}") from None
    if not isinstance(document, Mapping):
        raise JsonSchemaError("a JSON Schema is a JSON object")
    return document


def spark_type(text: str | Mapping) -> T.StructType:
    """The struct a document of this schema is read into."""
    document = parse(text)
    root = _Converter(document).convert(document, "$", ())
    if not isinstance(root, T.StructType):
        raise JsonSchemaError("the root of a value's schema must be an object with properties "
                              f"(it is typed {root.simpleString()})")
    return root


class _Converter:
    def __init__(self, document: Mapping) -> None:
        self.document = document

    def convert(self, schema: object, where: str, seen: tuple[str, ...]) -> T.DataType:
        if not isinstance(schema, Mapping):
            raise JsonSchemaError(f"{where}: a schema is a JSON object, not {json.dumps(schema)[:60]}")
        if "$ref" in schema:
            return self._ref(schema["$ref"], where, seen)
        for word in ("oneOf", "anyOf"):
            if word in schema:
                return self._nullable(schema[word], word, where, seen)
        if "allOf" in schema:
            raise JsonSchemaError(f"{where}: allOf is not supported")
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            if len(kinds) != 1:
                raise JsonSchemaError(f"{where}: one type besides null is supported, not {kind}")
            kind = kinds[0]
        if kind is None:
            kind = implied_type(schema, where)
        if kind == "object":
            return self._object(schema, where, seen)
        if kind == "array":
            if not isinstance(schema.get("items"), Mapping):
                raise JsonSchemaError(f"{where}: an array needs one schema for its items")
            return T.ArrayType(self.convert(schema["items"], f"{where}.items", seen), True)
        if kind == "string" and schema.get("format") in _FORMATS:
            return _FORMATS[schema["format"]]
        if kind in _SIMPLE:
            return _SIMPLE[kind]
        raise JsonSchemaError(f"{where}: the type {kind!r} has no Spark type")

    def _object(self, schema: Mapping, where: str, seen: tuple[str, ...]) -> T.StructType:
        properties = schema.get("properties")
        if not isinstance(properties, Mapping) or not properties:
            raise JsonSchemaError(f"{where}: an object needs properties (maps, additionalProperties "
                                  "alone, are not supported)")
        return T.StructType([T.StructField(name, self.convert(sub, f"{where}.{name}", seen), True)
                             for name, sub in properties.items()])

    def _nullable(self, branches: object, word: str, where: str, seen: tuple[str, ...]) -> T.DataType:
        kept = [b for b in branches if not is_null(b)] if isinstance(branches, list) else []
        if len(kept) != 1:
            raise JsonSchemaError(f"{where}: {word} is supported for one schema and null only")
        return self.convert(kept[0], where, seen)

    def _ref(self, ref: object, where: str, seen: tuple[str, ...]) -> T.DataType:
        prefix = next((p for p in LOCAL_REFS if isinstance(ref, str) and ref.startswith(p)), None)
        if prefix is None:
            raise JsonSchemaError(f"{where}: $ref {ref!r}: only #/definitions/… and #/$defs/… are supported")
        if ref in seen:
            raise JsonSchemaError(f"{where}: $ref {ref!r} is recursive; Spark types are finite")
        target = self.document.get(prefix[2:-1], {}).get(ref[len(prefix):])
        if target is None:
            raise JsonSchemaError(f"{where}: $ref {ref!r} names nothing in the schema")
        return self.convert(target, where, (*seen, ref))


def implied_type(schema: Mapping, where: str) -> str:
    """The type of a schema without ``type``: by its properties, items, or enum/const values."""
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    values = schema.get("enum", [schema["const"]] if "const" in schema else None)
    kinds = {_json_kind(v) for v in values or [] if v is not None}
    if len(kinds) == 1:
        return kinds.pop()
    raise JsonSchemaError(f"{where}: a field without one type (give it a type)")


def _json_kind(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string" if isinstance(value, str) else "unsupported"


def is_null(schema: object) -> bool:
    return isinstance(schema, Mapping) and schema.get("type") == "null"
