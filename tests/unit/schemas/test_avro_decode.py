"""The native Avro decoder against fastavro, the reference: random records of realistic and
edge schemas encoded by fastavro decode to the same values; schema resolution (fields added
with a default, fields removed, promotions, enums, unions) follows Avro's rules; a record that
does not decode is a null row with its reason, and the records around it are untouched."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from decimal import Decimal

import fastavro
import fastavro.utils
import numpy as np
import pyarrow as pa
import pytest

from jetspark.schemas import wire
from jetspark.schemas.avro_program import ERRORS, compile_program, decode, decode_values
from jetspark.schemas.avro_types import AvroSchemaError

ADDRESS = {"type": "record", "name": "Address", "fields": [
    {"name": "street", "type": "string"}, {"name": "zip", "type": ["null", "int"]}]}
ORDER = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
    {"name": "amount", "type": "double"}, {"name": "qty", "type": "int"},
    {"name": "score", "type": "float"}, {"name": "paid", "type": "boolean"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "ts_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "note", "type": ["null", "string"]},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "address", "type": ADDRESS},
    {"name": "previous", "type": ["null", "Address"]},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
    {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}},
    {"name": "digest", "type": {"type": "fixed", "name": "Md5", "size": 16}},
    {"name": "blob", "type": "bytes"},
    {"name": "either", "type": ["null", "string", "long"]},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}, {"name": "n", "type": "int"},
        {"name": "extras", "type": {"type": "map", "values": {"type": "array", "items": "double"}}}]}}},
]}
EDGES = {"type": "record", "name": "Edges", "fields": [
    {"name": "nothing", "type": "null"},
    {"name": "empty", "type": {"type": "record", "name": "Empty", "fields": []}},
    {"name": "money", "type": {"type": "fixed", "name": "Money", "size": 9,
                               "logicalType": "decimal", "precision": 20, "scale": 2}},
    {"name": "nested", "type": {"type": "array", "items": {"type": "array", "items": ["null", "boolean"]}}},
    {"name": "choice", "type": ["int", "string", {"type": "array", "items": "int"}]},
]}


def _encode(schema: dict, records: list[dict]) -> list[bytes]:
    parsed = fastavro.parse_schema(schema)
    out = []
    for record in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, record)
        out.append(buf.getvalue())
    return out


def _expected(schema: object, value: object, named: dict) -> object:
    """fastavro's value in the shape of the Arrow array's ``to_pylist``."""
    if isinstance(schema, str):
        if schema in named:
            return _expected(named[schema], value, named)
        return value
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if value is None:
            return None
        if len(branches) == 1:
            return _expected(branches[0], value, named)
        i = next(i for i, b in enumerate(branches) if _fits(b, value))
        return {f"member{j}": _expected(b, value, named) if j == i else None for j, b in enumerate(branches)}
    kind = schema["type"]
    if kind in ("record", "enum", "fixed"):
        named[schema["name"]] = schema
        named[f"{schema.get('namespace')}.{schema['name']}"] = schema
    if kind == "record":
        return {f["name"]: _expected(f["type"], value[f["name"]], named) for f in schema["fields"]}
    if kind == "array":
        return [_expected(schema["items"], v, named) for v in value]
    if kind == "map":
        return [(k, _expected(schema["values"], v, named)) for k, v in value.items()]
    if isinstance(kind, (dict, list)):
        return _expected(kind, value, named)
    return value


def _fits(branch: object, value: object) -> bool:
    kind = branch if isinstance(branch, str) else branch["type"]
    return {"int": int, "long": int, "string": str, "array": list, "boolean": bool}[kind] is type(value) or (
        kind in ("int", "long") and isinstance(value, int) and not isinstance(value, bool))


def _random(schema: dict, n: int) -> list[dict]:
    """fastavro's random records, their decimals within the declared precision (fastavro makes
    wider ones, which it then reads back rounded)."""
    records = list(fastavro.utils.generate_many(fastavro.parse_schema(schema), n))
    rng = np.random.default_rng(7)
    for record in records:
        for f in schema["fields"]:
            t = f["type"]
            if isinstance(t, dict) and t.get("logicalType") == "decimal":
                bound = 10 ** min(t["precision"], 18)
                digits = int(rng.integers(1 - bound, bound))
                record[f["name"]] = Decimal(digits).scaleb(-t.get("scale", 0))
    return records


@pytest.mark.parametrize("schema", [ORDER, EDGES], ids=["order", "edges"])
def test_random_records_decode_as_fastavro_reads_them(schema):
    records = _random(schema, 300)
    payloads = _encode(schema, records)
    array, errors = decode_values(compile_program(json.dumps(schema)), pa.array(payloads, pa.binary()))
    assert errors.tolist() == [0] * len(records)
    parsed = fastavro.parse_schema(schema)
    reference = [fastavro.schemaless_reader(io.BytesIO(p), parsed, parsed) for p in payloads]
    assert array.to_pylist() == [_expected(schema, r, {}) for r in reference]


def test_payloads_are_read_where_they_lie_behind_the_wire_header():
    records = _random(ORDER, 50)
    framed = wire.frame(np.full(50, 7), pa.array(_encode(ORDER, records), pa.binary()))
    parts = wire.split(framed.slice(10))
    array, errors = decode(compile_program(ORDER), parts.starts, parts.ends, parts.data)
    assert errors.tolist() == [0] * 40
    assert [r["id"] for r in array.to_pylist()] == [r["id"] for r in records[10:]]


V1 = {"type": "record", "name": "Reading", "fields": [
    {"name": "sensor", "type": "string"}, {"name": "value", "type": "int"},
    {"name": "level", "type": {"type": "enum", "name": "Level", "symbols": ["LOW", "HIGH", "ALARM"]}},
    {"name": "legacy", "type": "string"}]}
V2 = {"type": "record", "name": "Reading", "fields": [
    {"name": "sensor", "type": "string"},
    {"name": "value", "type": "double"},  # promoted from int
    {"name": "level", "type": {"type": "enum", "name": "Level", "symbols": ["LOW", "HIGH"],
                               "default": "HIGH"}},
    {"name": "unit", "type": "string", "default": "C"},  # added with a default
    {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None},
]}  # "legacy" removed


def test_an_older_writer_resolves_to_a_newer_reader():
    payloads = _encode(V1, [{"sensor": "s1", "value": 3, "level": "ALARM", "legacy": "x"},
                            {"sensor": "s2", "value": -1, "level": "LOW", "legacy": "y"}])
    array, errors = decode_values(compile_program(V1, V2), pa.array(payloads))
    assert errors.tolist() == [0, 0]
    assert array.to_pylist() == [
        {"sensor": "s1", "value": 3.0, "level": "HIGH", "unit": "C", "at": None},
        {"sensor": "s2", "value": -1.0, "level": "LOW", "unit": "C", "at": None}]


def test_a_newer_writer_resolves_to_an_older_reader_by_skipping():
    newer = {**V2, "fields": [*V2["fields"], {"name": "tags", "type": {"type": "map", "values": "string"}}]}
    at = datetime(2026, 1, 1, tzinfo=UTC)
    payloads = _encode(newer, [{"sensor": "s", "value": 1.5, "level": "LOW", "unit": "K", "at": at,
                                "tags": {"a": "b"}}])
    reader = {"type": "record", "name": "Reading", "fields": [{"name": "sensor", "type": "string"}]}
    array, _ = decode_values(compile_program(newer, reader), pa.array(payloads))
    assert array.to_pylist() == [{"sensor": "s"}]


def test_schemas_that_do_not_resolve_are_refused_naming_why():
    with pytest.raises(AvroSchemaError, match=r"'unit' .* no default"):
        compile_program(V1, {**V2, "fields": [*V2["fields"][:3], {"name": "unit", "type": "string"}]})
    with pytest.raises(AvroSchemaError, match="does not resolve"):
        compile_program({"type": "record", "name": "R", "fields": [{"name": "a", "type": "double"}]},
                        {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
    with pytest.raises(AvroSchemaError, match=r"\['ALARM'\]"):
        compile_program(V1, {**V1, "fields": [V1["fields"][0], V1["fields"][1], {
            "name": "level", "type": {"type": "enum", "name": "Level", "symbols": ["LOW", "HIGH"]}}]})


def test_a_writer_type_read_into_a_reader_union():
    writer = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    reader = {"type": "record", "name": "R", "fields": [{"name": "a", "type": ["null", "string", "long"]}]}
    array, _ = decode_values(compile_program(writer, reader), pa.array(_encode(writer, [{"a": 5}])))
    assert array.to_pylist() == [{"a": {"member0": None, "member1": 5}}]


def test_a_record_that_does_not_decode_is_a_null_row_with_its_reason_and_the_others_are_intact():
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "name", "type": "string"},
        {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A"]}},
        {"name": "opt", "type": ["null", "long"]},
        {"name": "xs", "type": {"type": "array", "items": "long"}}]}
    good = _encode(schema, [{"name": "ok", "kind": "A", "opt": 1, "xs": [1, 2]}])[0]
    bad = {
        1: good[:4],  # cut short inside the array
        2: b"\x04ok\x00\x02" + b"\xff" * 11,  # a varint of 11 bytes
        3: b"\x04ok\x00\x09",  # union branch 4 of 2
        4: b"\x04ok\x02",  # enum index 1 of 1
        5: b"\x03ok",  # a negative string length
    }
    column = [good]
    for code in sorted(bad):
        column += [bad[code], good]
    array, errors = decode_values(compile_program(schema), pa.array(column, pa.binary()))
    assert errors.tolist() == [0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0]
    rows = array.to_pylist()
    assert rows[1::2] == [None] * 5
    assert rows[0::2] == [{"name": "ok", "kind": "A", "opt": 1, "xs": [1, 2]}] * 6
    assert set(ERRORS) >= set(bad)


def test_decimals_of_every_width_and_sign():
    schema = {"type": "record", "name": "D", "fields": [
        {"name": "b", "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 4}}]}
    values = [Decimal("0"), Decimal("-1.0001"), Decimal("12345678901234567890123456789012.3456"),
              Decimal("-99999999999999999999999999999999.9999")]
    array, _ = decode_values(compile_program(schema), pa.array(_encode(schema, [{"b": v} for v in values])))
    assert [r["b"] for r in array.to_pylist()] == values


def test_millisecond_timestamps_past_64_bit_microseconds_are_malformed_rows_naming_the_field():
    def millis(logical: str) -> dict:
        return {"type": "long", "logicalType": logical}

    fields = [("ts", millis("timestamp-millis")), ("local", millis("local-timestamp-millis")),
              ("maybe", ["null", millis("timestamp-millis")]),
              ("many", {"type": "array", "items": millis("timestamp-millis")}),
              ("by", {"type": "map", "values": millis("local-timestamp-millis")}), ("name", "string")]
    schema = {"type": "record", "name": "T", "fields": [{"name": n, "type": t} for n, t in fields]}
    plain = json.loads(json.dumps(schema).replace('"logicalType": ', '"was": '))  # the same bytes
    edge = 2**63 // 1000  # the widest millisecond count whose microseconds fit in 64 bits
    good = {"ts": 1767225600000, "local": -edge, "maybe": edge, "many": [1, -1], "by": {"k": 2}, "name": "ok"}
    bad = [{"ts": 9_300_000_000_000_000}, {"local": -(2**63)}, {"maybe": edge + 1},
           {"many": [1, 2, -edge - 1]}, {"by": {"a": 1, "b": 2**63 - 1}}]
    records = [good]
    for change in bad:
        records += [{**good, **change, "name": "bad"}, {**good, "many": [7] * 3, "by": {}}]
    array, errors = decode_values(compile_program(schema), pa.array(_encode(plain, records), pa.binary()))
    program = compile_program(schema)
    assert [program.reason(int(c)) if c else None for c in errors][1::2] == [
        f"field {name}: {ERRORS[8]}" for name in ("ts", "local", "maybe", "many[]", "by{}")]
    assert errors.tolist()[0::2] == [0] * 6
    assert array.is_null().to_pylist() == [False, True] * 5 + [False]
    kept = array.filter(pa.array(errors == 0))
    as_ints = {name: kept.field(name).cast(pa.int64()).to_pylist() for name in ("ts", "local", "maybe")}
    assert as_ints == {"ts": [1767225600000000] * 6, "local": [-edge * 1000] * 6, "maybe": [edge * 1000] * 6}
    many = kept.field("many").flatten().cast(pa.int64()).to_pylist()
    assert many == [1000, -1000] + [7000] * 15
    assert kept.field("name").to_pylist() == ["ok"] * 6


def test_a_decimal_with_more_digits_than_its_precision_is_a_malformed_row_not_a_truncated_value():
    def dec(precision: int) -> dict:
        return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": 2}

    schema = {"type": "record", "name": "D", "fields": [
        {"name": "d", "type": dec(4)}, {"name": "wide", "type": {"type": "array", "items": dec(38)}}]}

    def record(d: int, wide: list[int]) -> bytes:
        def raw(v: int, size: int | None = None) -> bytes:
            b = v.to_bytes(size or (v.bit_length() // 8 + 1), "big", signed=True)
            return _zigzag(len(b)) + b
        items = b"".join(raw(*w) if isinstance(w, tuple) else raw(w) for w in wide)
        return raw(d) + (_zigzag(len(wide)) + items + b"\x00" if wide else b"\x00")

    most = 10**38 - 1
    column = [record(9999, [most, -most]), record(10000, []), record(-9999, [(5, 20)]),
              record(1, [2**130 + 5]), record(-10000, []), record(1, [-(2**127)]), record(2, [10**38]),
              record(3, [(-most, 17)])]
    program = compile_program(schema)
    array, errors = decode_values(program, pa.array(column, pa.binary()))
    assert [program.reason(int(c)) if c else None for c in errors] == [
        None, f"field d: {ERRORS[9]}", None, f"field wide[]: {ERRORS[9]}", f"field d: {ERRORS[9]}",
        f"field wide[]: {ERRORS[9]}", f"field wide[]: {ERRORS[9]}", None]
    assert array.validate(full=True) is None
    rows = array.to_pylist()
    assert rows[0] == {"d": Decimal("99.99"), "wide": [Decimal(f"{most}e-2"), Decimal(f"-{most}e-2")]}
    assert rows[2] == {"d": Decimal("-99.99"), "wide": [Decimal("0.05")]}
    assert rows[7] == {"d": Decimal("0.03"), "wide": [Decimal(f"-{most}e-2")]}


def _zigzag(n: int) -> bytes:
    v, out = (n << 1) ^ (n >> 63), b""
    while v > 0x7F:
        out += bytes([v & 0x7F | 0x80])
        v >>= 7
    return out + bytes([v])
