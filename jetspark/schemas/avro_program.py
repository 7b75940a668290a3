"""Avro records decoded a column at a time: a writer schema, resolved against the reader
schema by Avro's rules, is compiled into a program the native decoder (``_avro_arrow.c``)
runs over every payload; its buffers become one Arrow struct array in the reader's Spark
types (:mod:`jetspark.schemas.avro_types`).

Schema resolution (Avro specification, "Schema Resolution"), as compiled here:

* records: fields matched by name (or a reader field's aliases); a writer field the reader
  lacks is read and skipped; a reader field the writer lacks takes the reader's default;
* numbers are promoted int → long → float → double; ``string`` and ``bytes`` are one another;
* enums: a writer symbol the reader lacks becomes the reader's enum default, else the record
  does not resolve;
* unions: each writer branch is resolved against the first reader branch of the same type
  (or the reader's type when it is no union).

A record that does not decode (cut short, a union branch or enum index out of range, a
length beyond the payload, a millisecond timestamp whose microseconds pass 64 bits) is a
null row with an error code (:data:`ERRORS`); the caller applies the malformed-record policy.
A writer schema the reader cannot resolve raises
:class:`~jetspark.schemas.avro_types.AvroSchemaError` from :func:`compile_program`, and so
does one that is malformed (a registry that does not check what it stores), recursive (a
record that contains itself, e.g. a linked list: the program is a tree, and Spark's
``from_avro`` refuses such schemas too), or whose program would pass :data:`MAX_NODES` (a
record type used twice by the next, level after level, doubles the program per level).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np
import pyarrow as pa
from pyspark.sql import types as T

from jetspark.schemas.avro_types import AvroSchemaError, _full_name, decimal_of, fixed_size, parse, spark_type

# the program's words (keep in step with _avro_arrow.c)
K_NULL, K_BOOLEAN, K_INT, K_LONG, K_FLOAT, K_DOUBLE, K_BYTES = 0, 1, 2, 3, 4, 5, 6
K_FIXED, K_ENUM, K_RECORD, K_ARRAY, K_MAP, K_UNION, K_DECIMAL_BYTES, K_DECIMAL_FIXED = range(7, 15)
O_SAME, O_INT64, O_FLOAT32, O_FLOAT64 = 0, 1, 2, 3

ERRORS = {1: "the payload ends inside a value", 2: "a variable-length number runs past 10 bytes",
          3: "a union branch index out of range", 4: "an enum index out of range",
          5: "a length or item count out of range", 6: "out of memory",
          7: "the record decodes to more than 64 MiB of columns",
          8: "a millisecond timestamp past Spark's range (beyond ±9223372036854775 ms its microseconds "
             "overflow 64 bits)",
          9: "a decimal with more digits than its precision"}
"""Why a record did not decode, by error code. A value out of its field's range (8, 9) may
have a code of 16 on instead, which :meth:`Program.reason` gives with the field's name."""

_PRIMITIVE_KIND = {"null": K_NULL, "boolean": K_BOOLEAN, "int": K_INT, "long": K_LONG,
                   "float": K_FLOAT, "double": K_DOUBLE, "bytes": K_BYTES, "string": K_BYTES}
_PROMOTION = {("int", "long"): O_INT64, ("int", "float"): O_FLOAT32, ("int", "double"): O_FLOAT64,
              ("long", "float"): O_FLOAT32, ("long", "double"): O_FLOAT64, ("float", "double"): O_FLOAT64}
MAX_NODES = 100_000
"""The most nodes a compiled program has (5 words each); a larger one is refused."""
_BUDGET = threading.local()
_TIME_UNITS = {"timestamp-millis": 1000, "local-timestamp-millis": 1000,
               "timestamp-micros": 1, "local-timestamp-micros": 1}


@dataclass
class _Node:
    """One node of the program, and how its buffers become an Arrow array."""

    kind: int
    out: int = O_SAME
    store: bool = True
    arg: int = 0
    children: list[_Node] = field(default_factory=list)
    spark: T.DataType | None = None  # the reader's type (None: skipped)
    scale_us: int = 1  # timestamps: micros per writer unit
    symbols: list[str] | None = None  # enums: the output symbol of each writer index (None: unresolved)
    fields: list[tuple[str, int | None, object]] = field(default_factory=list)
    """records: per reader field (name, index of the writer child or None, default value)."""
    members: list[int] = field(default_factory=list)  # unions as structs: child index per member
    member_of: T.StructType | None = None
    """A writer type read into a reader union of several types: the union's struct type, the
    value going into member ``arg_member``."""
    arg_member: int = 0

    def words(self) -> list[int]:
        out = [self.kind, self.out, int(self.store), self.arg, len(self.children)]
        for child in self.children:
            out += child.words()
        return out


@dataclass(frozen=True)
class Program:
    """A compiled (writer, reader) pair: the words the decoder runs and the Arrow type out."""

    words: bytes
    root: _Node
    arrow_type: pa.DataType
    checked: tuple[tuple[int, tuple[int, ...], int, int, str, int], ...] = ()
    """Nodes whose values are checked against their range (millisecond timestamps, decimals):
    per node its index in pre-order, the indices of the arrays and maps it is in, its error
    code, its reason's code in :data:`ERRORS` (8, 9), its field's name and a decimal's precision."""

    def reason(self, code: int) -> str:
        """Why a record with error ``code`` did not decode."""
        for _at, _within, own, why, name, _precision in self.checked:
            if own == code:
                return f"field {name}: {ERRORS[why]}"
        return ERRORS[code]


def compile_program(writer: object, reader: object | None = None) -> Program:
    """The program that decodes records of ``writer`` into the reader's types (the writer's
    own when ``reader`` is None). Raises AvroSchemaError when they do not resolve."""
    _BUDGET.left = MAX_NODES
    try:
        w = _Names().resolve_all(parse(writer))
        r = w if reader is None else _Names().resolve_all(parse(reader))
        _size(w, {}, ())  # refused before any node is built when too large
        root = _compile(w, r)
        words = np.array(root.words(), np.int32).tobytes()
    except RecursionError:
        raise AvroSchemaError("the Avro schema nests too deep to compile") from None
    except (AttributeError, KeyError, TypeError, ValueError, OverflowError, IndexError) as e:
        raise AvroSchemaError(f"not an Avro schema: {type(e).__name__} {str(e)[:80]}") from None
    return Program(words, root, _arrow(root.spark), tuple(_checked(root)))


def _checked(root: _Node):
    """The stored nodes whose values are checked (:attr:`Program.checked`); the first 240 get
    a code each (16 on), the others their reason's."""
    found, at = [], 0

    def walk(node: _Node, name: str, within: tuple[int, ...]) -> None:
        nonlocal at
        index, at = at, at + 1
        why = 8 if node.scale_us > 1 else 9 if node.kind in (K_DECIMAL_BYTES, K_DECIMAL_FIXED) else 0
        if node.store and why:
            precision = node.spark.precision if why == 9 else 0
            found.append((index, within, 16 + len(found) if len(found) < 240 else why, why, name or "value",
                          precision))
        names = {i: n for n, i, _d in node.fields if i is not None}
        inner = (*within, index) if node.kind in (K_ARRAY, K_MAP) else within
        for i, child in enumerate(node.children):
            part = (f"{name}.{names[i]}" if name else names[i]) if i in names else name
            if node.kind == K_ARRAY:
                part = f"{name}[]"
            elif node.kind == K_MAP:
                part = f"{name}{{}}" if i == 1 else f"{name}{{key}}"
            walk(child, part, inner)

    walk(root, "", ())
    return found


def _size(w: object, sizes: dict[int, int], within: tuple) -> int:
    """The nodes of ``w``'s program (each named type counted once per use, in time linear in
    the schema's text); AvroSchemaError when it passes MAX_NODES or ``w`` contains itself."""
    if not isinstance(w, list | Mapping):
        return 1
    found = sizes.get(id(w))
    if found is not None:
        return found
    if any(w is outer for outer in within):
        raise _recursive(w)
    inside = (*within, w)
    if isinstance(w, list):
        size = 1 + sum(_size(b, sizes, inside) for b in w)
    elif _base(w) in ("record", "error"):
        size = 1 + sum(_size(f["type"], sizes, inside) for f in w.get("fields", ()))
    elif _base(w) == "array":
        size = 1 + _size(w["items"], sizes, inside)
    elif _base(w) == "map":
        size = 2 + _size(w["values"], sizes, inside)
    else:
        size = 1
    if size > MAX_NODES:
        _BUDGET.left = -1
        _spend()
    sizes[id(w)] = size
    return size


def _spend() -> None:
    """One more node of the program being compiled (AvroSchemaError past MAX_NODES)."""
    _BUDGET.left -= 1
    if _BUDGET.left < 0:
        raise AvroSchemaError(f"the program would have more than {MAX_NODES:,} nodes (a record type "
                              "used many times over, e.g. twice per level, doubles it per level)")


def decode(program: Program, starts: np.ndarray, ends: np.ndarray, data: np.ndarray
           ) -> tuple[pa.Array, np.ndarray]:
    """The records ``data[starts[i]:ends[i]]`` as one array of the reader's type, and each
    record's error code (0: decoded; else a null row, see :data:`ERRORS`)."""
    from jetspark.schemas import _avro_arrow

    nodes, errors = _avro_arrow.decode(program.words, np.ascontiguousarray(starts, np.int64),
                                       np.ascontiguousarray(ends, np.int64), np.ascontiguousarray(data))
    codes = np.frombuffer(errors, np.uint8)
    if program.checked:
        nodes = list(nodes)
        codes = _out_of_range(program, nodes, codes)
    return _assemble(program.root, iter(nodes)), codes


_MAX_MILLIS = np.iinfo(np.int64).max // 1000


def _out_of_range(program: Program, nodes: list, codes: np.ndarray) -> np.ndarray:
    """Records with a value past its field's range made null rows with the field's code:
    millisecond timestamps whose microseconds pass 64 bits, decimals with more digits than
    their precision (Spark's from_avro fails on both); ``nodes`` changed in place."""
    codes = codes.copy()
    for index, within, code, why, _name, precision in program.checked:
        count, valid, values, offsets, data = nodes[index]
        if why == 8:
            millis = np.frombuffer(values, np.int64)
            past = (millis > _MAX_MILLIS) | (millis < -_MAX_MILLIS)
        else:
            past = _past_precision(np.frombuffer(values, np.uint64).reshape(-1, 2), precision)
        bad = np.flatnonzero(past & (np.frombuffer(valid, np.uint8) != 0))
        if not len(bad):
            continue
        flags = np.frombuffer(valid, np.uint8).copy()
        flags[bad] = 0  # no value out of range left, even under a null row
        nodes[index] = (count, flags.tobytes(), values, offsets, data)
        rows = bad
        for outer in reversed(within):  # an item → the array or map element holding it
            rows = np.searchsorted(np.frombuffer(nodes[outer][3], np.int32), rows, side="right") - 1
        rows = np.unique(rows)
        codes[rows[codes[rows] == 0]] = code
        root = nodes[0]
        roots = np.frombuffer(root[1], np.uint8).copy()
        roots[rows] = 0
        nodes[0] = (root[0], roots.tobytes(), *root[2:])
    return codes


def _past_precision(words: np.ndarray, precision: int) -> np.ndarray:
    """Which 128-bit two's complement values (rows of low, high little-endian words) have more
    than ``precision`` digits."""
    lo, hi = words[:, 0], words[:, 1]
    negative = (hi >> np.uint64(63)) == 1
    one = np.uint64(1)
    neg_lo = ~lo + one  # the magnitude of a negative value: its two's complement
    neg_hi = ~hi + (lo == 0).astype(np.uint64)
    mlo, mhi = np.where(negative, neg_lo, lo), np.where(negative, neg_hi, hi)
    bound = 10 ** precision
    blo, bhi = np.uint64(bound & (2**64 - 1)), np.uint64(bound >> 64)
    return (mhi > bhi) | ((mhi == bhi) & (mlo >= blo))


def decode_values(program: Program, payloads: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """:func:`decode` of every value of a binary column (no wire-format header)."""
    payloads = payloads.cast(pa.binary()) if payloads.type != pa.binary() else payloads
    n = len(payloads)
    _validity, offsets_buf, data_buf = payloads.buffers()
    offsets = np.frombuffer(offsets_buf, np.int32, n + 1, payloads.offset * 4).astype(np.int64)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return decode(program, offsets[:-1], offsets[1:], data)


# -- names -------------------------------------------------------------------------------------

class _Names:
    """Named types replaced by their definitions (a schema may name a type defined before)."""

    def __init__(self) -> None:
        self.named: dict[str, object] = {}

    def resolve_all(self, schema: object, namespace: str | None = None, depth: int = 0) -> object:
        if depth > 64:
            raise AvroSchemaError("the Avro schema nests too deep (a recursive schema has no Spark type)")
        if isinstance(schema, str):
            if schema in _PRIMITIVE_KIND:
                return schema
            name = _full_name(schema, namespace)
            found = self.named.get(name, self.named.get(schema))
            if found is None:
                raise AvroSchemaError(f"the Avro schema names type {schema!r}, which it does not define")
            return found
        if isinstance(schema, list):
            return [self.resolve_all(b, namespace, depth + 1) for b in schema]
        if not isinstance(schema, Mapping):
            raise AvroSchemaError(f"not an Avro schema: {schema!r}"[:100])
        kind = schema.get("type")
        if isinstance(kind, (list, Mapping)) or (isinstance(kind, str) and kind not in _NAMED and
                                                kind not in ("array", "map") and kind not in _PRIMITIVE_KIND):
            return self.resolve_all(kind, namespace, depth + 1)
        if kind in _NAMED:
            name = _full_name(schema["name"], schema.get("namespace", namespace))
            out = dict(schema, _full=name)
            self.named[name] = out
            if kind in ("record", "error"):
                inner = name.rpartition(".")[0] or None
                out["fields"] = [dict(f, type=self.resolve_all(f["type"], inner, depth + 1))
                                 for f in schema.get("fields", ())]
            return out
        if kind == "array":
            return dict(schema, items=self.resolve_all(schema["items"], namespace, depth + 1))
        if kind == "map":
            return dict(schema, values=self.resolve_all(schema["values"], namespace, depth + 1))
        return schema


_NAMED = ("record", "error", "enum", "fixed")


# -- resolution and compilation ------------------------------------------------------------------

def _type_name(s: object) -> str:
    """A schema's type for branch matching: the primitive, the full name, or array/map."""
    if isinstance(s, str):
        return s
    if isinstance(s, list):
        return "union"
    return s.get("_full") or s["type"]


def _base(s: object) -> str:
    return s if isinstance(s, str) else "union" if isinstance(s, list) else s["type"]


def _logical(s: object) -> str | None:
    return s.get("logicalType") if isinstance(s, Mapping) else None


def _compile(w: object, r: object | None) -> _Node:
    """The node decoding ``w`` into ``r``'s type; ``r`` None: read and skip."""
    if r is None:
        return _skip(w)
    _spend()
    if isinstance(w, list):
        return _union(w, r)
    if isinstance(r, list):  # writer X, reader union: X against the branch that takes it
        branch = _branch_for(w, r)
        node = _compile(w, branch)
        readers = _non_null(r)
        if len(readers) > 1:
            node.member_of, node.arg_member = spark_type(r)[0], readers.index(branch)
        return node
    wb, rb = _base(w), _base(r)
    spark = spark_type(r)[0]
    if wb in ("record", "error"):
        if rb not in ("record", "error"):
            raise _unresolved(w, r)
        return _record(w, r, spark)
    if wb == "enum":
        if rb == "string":  # not Avro's rule, but what a reader of the value as text wants
            return _Node(K_ENUM, arg=len(w["symbols"]), spark=spark, symbols=list(w["symbols"]))
        if rb != "enum":
            raise _unresolved(w, r)
        default = r.get("default")
        missing = [s for s in w["symbols"] if s not in r["symbols"]]
        if missing and default is None:
            raise AvroSchemaError(f"the writer's enum {w.get('_full')} has symbols {missing} that the "
                                  "reader's lacks, and the reader's has no default")
        symbols = [s if s in r["symbols"] else default for s in w["symbols"]]
        return _Node(K_ENUM, arg=len(w["symbols"]), spark=spark, symbols=symbols)
    if wb == "array":
        if rb != "array":
            raise _unresolved(w, r)
        return _Node(K_ARRAY, spark=spark, children=[_compile(w["items"], r["items"])])
    if wb == "map":
        if rb != "map":
            raise _unresolved(w, r)
        key = _Node(K_BYTES, spark=T.StringType())
        return _Node(K_MAP, spark=spark, children=[key, _compile(w["values"], r["values"])])
    if decimal_of(w) is not None or decimal_of(r) is not None:
        if decimal_of(w) != decimal_of(r):
            raise _unresolved(w, r)
        if wb == "fixed":
            return _Node(K_DECIMAL_FIXED, arg=fixed_size(w), spark=spark)
        return _Node(K_DECIMAL_BYTES, spark=spark)
    if wb == "fixed":
        if rb != "fixed" or fixed_size(w) != fixed_size(r):
            raise _unresolved(w, r)
        return _Node(K_FIXED, arg=fixed_size(w), spark=spark)
    if wb not in _PRIMITIVE_KIND or rb not in _PRIMITIVE_KIND:
        raise _unresolved(w, r)
    out = O_SAME
    if wb != rb:
        if {wb, rb} == {"string", "bytes"}:
            out = O_SAME
        elif (wb, rb) in _PROMOTION:
            out = _PROMOTION[(wb, rb)]
        else:
            raise _unresolved(w, r)
    node = _Node(_PRIMITIVE_KIND[wb], out=out, spark=spark)
    node.scale_us = _TIME_UNITS.get(_logical(r) or "", 1)
    if _logical(w) in _TIME_UNITS and _logical(r) in _TIME_UNITS:
        node.scale_us = _TIME_UNITS[_logical(w)]  # the writer's unit, stored in micros
    return node


def _non_null(branches: list) -> list:
    return [b for b in branches if _base(b) != "null"]


def _branch_for(w: object, r: list) -> object:
    """The reader branch a writer type resolves to: the same type first, then a promotion."""
    for b in r:
        if _type_name(b) == _type_name(w):
            return b
    for b in r:
        try:
            _compile(w, b)
            return b
        except AvroSchemaError:
            continue
    raise _unresolved(w, r)


def _union(w: list, r: object) -> _Node:
    null_at = next((i for i, b in enumerate(w) if _base(b) == "null"), -1)
    rest = _non_null(w)
    spark = spark_type(r)[0]
    node = _Node(K_UNION, arg=null_at, spark=spark)
    readers = _non_null(r) if isinstance(r, list) else [r]
    if len(readers) <= 1:  # the reader has one type: each writer branch resolves to it
        target = readers[0] if readers else "null"
        for i, b in enumerate(w):
            node.children.append(_Node(K_NULL, store=False) if i == null_at else _compile(b, target))
        if len(rest) > 1:  # several writer branches into one column: not decodable as one array
            raise AvroSchemaError(f"a writer union of {[_type_name(b) for b in rest]} into one reader "
                                  f"type {_type_name(target)} is not supported")
        return node
    # reader union of several types: a struct of members, one per reader branch
    for i, b in enumerate(w):
        if i == null_at:
            node.children.append(_Node(K_NULL, store=False))
            continue
        branch = _branch_for(b, readers)
        if readers.index(branch) in node.members:
            raise AvroSchemaError(f"two writer branches resolve to the reader's {_type_name(branch)}")
        child = _compile(b, branch)
        child.member_of = None  # the union's struct is built here
        node.children.append(child)
        node.members.append(readers.index(branch))
    return node


def _record(w: Mapping, r: Mapping, spark: T.StructType) -> _Node:
    node = _Node(K_RECORD, spark=spark)
    by_name = {}
    for f in r.get("fields", ()):
        for name in [f["name"], *f.get("aliases", ())]:
            by_name.setdefault(name, f)
    taken: dict[str, int] = {}
    for wf in w.get("fields", ()):
        rf = by_name.get(wf["name"])
        if rf is None or rf["name"] in taken:
            node.children.append(_skip(wf["type"]))
            continue
        taken[rf["name"]] = len(node.children)
        node.children.append(_compile(wf["type"], rf["type"]))
    for rf in r.get("fields", ()):
        if rf["name"] not in taken and "default" not in rf:
            raise AvroSchemaError(f"the reader's field {rf['name']!r} of {r.get('_full')} is not in the "
                                  "writer's schema and has no default")
        node.fields.append((rf["name"], taken.get(rf["name"]), _default(rf["type"], rf.get("default"))))
    return node


def _default(schema: object, default: object) -> object:
    """A reader's default (Avro's JSON encoding) in the units its Spark column holds: a
    ``timestamp-millis`` default is milliseconds, Spark's timestamps microseconds. A union's
    default is of its first branch; records, arrays and maps convert their members."""
    if default is None:
        return None
    if isinstance(schema, list):
        return _default(schema[0], default) if schema else default
    if not isinstance(schema, Mapping):
        return default
    base = _base(schema)
    if base in ("record", "error") and isinstance(default, Mapping):
        types = {f["name"]: f["type"] for f in schema.get("fields", ())}
        return {k: _default(types[k], v) if k in types else v for k, v in default.items()}
    if base == "array" and isinstance(default, list):
        return [_default(schema["items"], v) for v in default]
    if base == "map" and isinstance(default, Mapping):
        return {k: _default(schema["values"], v) for k, v in default.items()}
    scale = _TIME_UNITS.get(_logical(schema) or "")
    if scale is not None and base == "long" and isinstance(default, int) and not isinstance(default, bool):
        return default * scale
    return default


def _skip(w: object, within: tuple = ()) -> _Node:
    """A node that reads ``w`` and stores nothing (``within``: the records it is part of)."""
    _spend()
    if isinstance(w, list):
        return _Node(K_UNION, store=False, arg=-1, children=[_skip(b, within) for b in w])
    base = _base(w)
    if base in ("record", "error"):
        if any(w is outer for outer in within):
            raise _recursive(w)
        inside = (*within, w)
        return _Node(K_RECORD, store=False, children=[_skip(f["type"], inside) for f in w.get("fields", ())])
    if base == "enum":
        return _Node(K_ENUM, store=False, arg=len(w["symbols"]))
    if base == "array":
        return _Node(K_ARRAY, store=False, children=[_skip(w["items"], within)])
    if base == "map":
        return _Node(K_MAP, store=False, children=[_Node(K_BYTES, store=False), _skip(w["values"], within)])
    if base == "fixed":
        return _Node(K_FIXED, store=False, arg=fixed_size(w))
    return _Node(_PRIMITIVE_KIND[base], store=False)


def _recursive(w: Mapping) -> AvroSchemaError:
    return AvroSchemaError(f"the record {w.get('_full')} contains itself (a recursive schema, such as "
                           "a linked list): jetspark reads none, as Spark's from_avro by default")


def _unresolved(w: object, r: object) -> AvroSchemaError:
    return AvroSchemaError(f"the writer's {_type_name(w)} does not resolve to the reader's {_type_name(r)}")


# -- buffers → Arrow -----------------------------------------------------------------------------

def _validity(count: int, raw: bytes) -> pa.Buffer | None:
    flags = np.frombuffer(raw, np.uint8)
    if flags.all():
        return None
    return pa.py_buffer(np.packbits(flags, bitorder="little").tobytes())


def _assemble(node: _Node, nodes) -> pa.Array | None:
    """The Arrow array of ``node`` from the decoder's buffers (consumed in pre-order)."""
    array = _assemble_node(node, nodes)
    if array is None or node.member_of is None:
        return array
    struct = _arrow(node.member_of)
    members = [pa.nulls(len(array), f.type) for f in struct]
    members[node.arg_member] = array
    return pa.StructArray.from_arrays(members, fields=list(struct))


def _assemble_node(node: _Node, nodes) -> pa.Array | None:
    count, valid, values, offsets, data = next(nodes)
    children = [_assemble(c, nodes) for c in node.children]
    if not node.store:
        return None
    arrow_type = _arrow(node.spark)
    mask = _validity(count, valid)
    kind = node.kind
    if kind == K_RECORD:
        arrays, names = [], []
        for name, index, default in node.fields:
            names.append(name)
            field_type = _arrow(node.spark[name].dataType)
            arrays.append(children[index] if index is not None else _constant(default, field_type, count))
        return pa.Array.from_buffers(arrow_type, count, [mask], children=arrays)
    if kind == K_UNION:
        stored = [c for c, child in zip(children, node.children, strict=True) if child.store]
        if not node.members:  # one reader type: the branch's array carries the nulls
            return stored[0] if stored else pa.nulls(count, arrow_type)
        members = [pa.nulls(count, f.type) for f in arrow_type]
        for member, array in zip(node.members, stored, strict=True):
            members[member] = array  # two writer branches into one member: not compiled (see _union)
        return pa.Array.from_buffers(arrow_type, count, [mask], children=members)
    if kind == K_ARRAY:
        return pa.Array.from_buffers(arrow_type, count, [mask, pa.py_buffer(offsets)], children=[children[0]])
    if kind == K_MAP:
        entries = pa.StructArray.from_arrays([children[0], children[1]],
                                             fields=[arrow_type.key_field, arrow_type.item_field])
        return pa.Array.from_buffers(arrow_type, count, [mask, pa.py_buffer(offsets)], children=[entries])
    if kind == K_BYTES:
        storage = pa.string() if pa.types.is_string(arrow_type) else pa.binary()
        array = pa.Array.from_buffers(storage, count, [mask, pa.py_buffer(offsets), pa.py_buffer(data)])
        return array
    if kind == K_ENUM:
        indices = np.frombuffer(values, np.int32)
        symbols = pa.array(node.symbols, pa.string())
        codes = pa.array(indices, mask=_mask_np(valid))
        return pa.DictionaryArray.from_arrays(codes, symbols).cast(pa.string())
    if kind == K_NULL:
        return pa.nulls(count, arrow_type)
    if kind == K_BOOLEAN:
        bits = np.packbits(np.frombuffer(values, np.uint8), bitorder="little").tobytes()
        return pa.Array.from_buffers(pa.bool_(), count, [mask, pa.py_buffer(bits)])
    if kind in (K_DECIMAL_BYTES, K_DECIMAL_FIXED):
        return pa.Array.from_buffers(arrow_type, count, [mask, pa.py_buffer(values)])
    if kind == K_FIXED:
        fixed = pa.Array.from_buffers(pa.binary(node.arg), count, [mask, pa.py_buffer(values)])
        return fixed.cast(pa.binary())
    stored = _stored_type(node)
    array = pa.Array.from_buffers(stored, count, [mask, pa.py_buffer(values)])
    if pa.types.is_timestamp(arrow_type):
        micros = np.frombuffer(values, np.int64) * node.scale_us
        return pa.Array.from_buffers(arrow_type, count, [mask, pa.py_buffer(micros.tobytes())])
    if pa.types.is_date32(arrow_type):
        return pa.Array.from_buffers(arrow_type, count, [mask, pa.py_buffer(values)])
    return array if array.type == arrow_type else array.cast(arrow_type)


def _mask_np(valid: bytes) -> np.ndarray:
    return np.frombuffer(valid, np.uint8) == 0


def _stored_type(node: _Node) -> pa.DataType:
    if node.kind == K_DOUBLE or node.out == O_FLOAT64:
        return pa.float64()
    if node.out == O_FLOAT32 or (node.kind == K_FLOAT and node.out == O_SAME):
        return pa.float32()
    if node.kind == K_LONG or node.out == O_INT64:
        return pa.int64()
    return pa.int32()


def _arrow(spark: T.DataType) -> pa.DataType:
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(spark, timezone="UTC")  # Spark's timestamps: microseconds in UTC


def _constant(default: object, arrow_type: pa.DataType, count: int) -> pa.Array:
    """A reader field the writer lacks: its default (Avro's JSON encoding of it) in every row."""
    if pa.types.is_binary(arrow_type) and isinstance(default, str):
        default = default.encode("latin-1")  # Avro's JSON default of bytes: code points 0-255
    elif pa.types.is_decimal(arrow_type) and isinstance(default, str):
        unscaled = int.from_bytes(default.encode("latin-1"), "big", signed=True)
        default = Decimal(unscaled).scaleb(-arrow_type.scale)
    elif pa.types.is_struct(arrow_type) and isinstance(default, Mapping):
        default = dict(default)
    try:
        scalar = pa.scalar(default, arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
        raise AvroSchemaError(f"the reader's default {json.dumps(default)[:60]} is not a "
                              f"{arrow_type}: {e}") from None
    return pa.repeat(scalar, count)
