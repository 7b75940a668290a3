"""The native Protobuf decoder against Google's protobuf runtime, the reference: random messages
of a realistic schema, serialized by protobuf itself, decode to the values Spark's
``from_protobuf`` gives them (an absent field null, a proto3 default null, an absent proto2
field that declares a default that default, repeated and map fields empty, enums by name,
timestamps in microseconds); a newer or older writer reads by field number; Confluent's message
indexes are read; a record that does not decode is a null row with its reason and the records
around it are untouched, and so is one that from_protobuf fails (a required field missing; in
the root message, a field in another wire type or a number its closed enum lacks); recursive
messages and groups are refused."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, message_factory, unknown_fields
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

from jetspark.schemas import protobuf_program as pp
from jetspark.schemas import protobuf_types as pt
from tests.protobuf_orders import OPTIONAL, closed_file, defaults_file, message_class, order_file

F = descriptor_pb2.FieldDescriptorProto


def reader(fdp: descriptor_pb2.FileDescriptorProto, name: str | None = None) -> pp.Program:
    text = base64.b64encode(fdp.SerializeToString()).decode()
    return pp.compile_program(pt.message(pt.load_file(text, lambda _n: None), name))


def decoded(program: pp.Program, payloads: list[bytes]) -> tuple[list, np.ndarray]:
    data = np.frombuffer(b"".join(payloads), np.uint8)
    lengths = np.array([len(p) for p in payloads], np.int64)
    ends = np.cumsum(lengths)
    array, errors = pp.decode(program, ends - lengths, ends, data)
    return array.to_pylist(), errors


def expected(msg) -> dict:
    """What Spark's from_protobuf gives a message, computed with protobuf's own accessors."""
    out = {}
    for f in msg.DESCRIPTOR.fields:
        value = getattr(msg, f.name)
        if pt.is_map(f):
            out[f.name] = {k: expected(v) if f.message_type.fields_by_name["value"].message_type else v
                           for k, v in value.items()}  # a map's order on the wire is not defined
        elif f.is_repeated:
            out[f.name] = [expected(v) if f.message_type else f.enum_type.values_by_number[v].name
                           if f.enum_type else _signed(f, v) for v in value]
        elif f.has_presence and not msg.HasField(f.name):
            out[f.name] = _declared_default(f) if f.has_default_value else None
        elif f.message_type is not None and f.message_type.name == "Timestamp":
            out[f.name] = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=value.ToMicroseconds())
        elif f.message_type is not None and f.message_type.name == "Duration":
            out[f.name] = timedelta(microseconds=value.ToMicroseconds())
        elif f.message_type is not None:
            out[f.name] = expected(value)
        elif f.enum_type is not None:
            out[f.name] = f.enum_type.values_by_number[value].name if value or f.has_presence else None
        elif not f.has_presence and value == f.default_value and str(value) != "-0.0":
            out[f.name] = None  # a default is absent on the wire (-0.0 is not: not the default's bits)
        else:
            out[f.name] = _signed(f, value)
    return out


def _declared_default(f):
    """Spark's value of an absent field that declares a default: Java's parsed default, an enum
    value by the name the declaration gives (the file's proto: Google's runtime keeps only the
    number, whose first name an alias is not)."""
    if f.enum_type is not None:
        fdp = {ITEM.name: ITEM, BOX.name: BOX}[f.file.name]
        declared = {name: field for name, field in pt._fields(fdp)}
        return declared[f.full_name].default_value
    return _signed(f, f.default_value)


def _signed(f, value):
    """Spark reads unsigned 32- and 64-bit numbers into int and long, as Java holds them."""
    bits = {F.TYPE_UINT32: 32, F.TYPE_FIXED32: 32, F.TYPE_UINT64: 64, F.TYPE_FIXED64: 64}.get(f.type)
    return value - 2**bits if bits and value >= 2 ** (bits - 1) else value


ORDER = order_file()
Order = message_class(ORDER)

int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
texts = st.text(max_size=8)
lines = st.fixed_dictionaries({}, optional={"sku": texts, "n": st.integers(0, 2**32 - 1)})
orders = st.fixed_dictionaries({}, optional={
    "id": int64s, "customer": texts, "legacy": texts, "amount": st.floats(allow_nan=False),
    "qty": int32s, "score": st.floats(width=32, allow_nan=False), "paid": st.booleans(), "delta": int64s,
    "small": int32s, "u32": st.integers(0, 2**32 - 1), "u64": st.integers(0, 2**64 - 1),
    "f32": st.integers(0, 2**32 - 1), "f64": st.integers(0, 2**64 - 1), "s32": int32s, "s64": int64s,
    "blob": st.binary(max_size=6), "status": st.sampled_from([0, 1, 2]),
    "placed": st.integers(-(2**40), 2**40), "took": st.integers(-(2**30), 2**30),
    "address": st.fixed_dictionaries({}, optional={"street": texts, "zip": int32s}),
    "tags": st.lists(texts, max_size=3), "counts": st.lists(int32s, max_size=4),
    "lines": st.lists(lines, max_size=3), "attrs": st.dictionaries(texts, lines, max_size=3),
    "maybe": int32s})


def build(values: dict):
    msg = Order()
    for name, value in values.items():
        if name == "placed":
            msg.placed.FromMicroseconds(value)
        elif name == "took":
            msg.took.FromMicroseconds(value)
        elif name == "address":
            msg.address.SetInParent()
            for k, v in value.items():
                setattr(msg.address, k, v)
        elif name == "lines":
            for line in value:
                msg.lines.add(**line)
        elif name == "attrs":
            for k, v in value.items():
                msg.attrs[k].CopyFrom(Order.Line(**v))
        elif name in ("tags", "counts"):
            getattr(msg, name).extend(value)
        else:
            setattr(msg, name, value)
    return msg


def test_the_spark_type_is_from_protobufs():
    spark = pt.spark_type(pt.message(pt.load_file(base64.b64encode(ORDER.SerializeToString()).decode(),
                                                  lambda _n: None), None))
    by_name = {f.name: f.dataType for f in spark.fields}
    assert by_name["id"] == T.LongType() and by_name["qty"] == T.IntegerType()
    assert by_name["u32"] == T.IntegerType() and by_name["u64"] == T.LongType()
    assert by_name["status"] == T.StringType() and by_name["placed"] == T.TimestampType()
    assert by_name["took"] == T.DayTimeIntervalType()
    assert by_name["tags"] == T.ArrayType(T.StringType(), containsNull=False)
    line = T.StructType([T.StructField("sku", T.StringType()), T.StructField("n", T.IntegerType())])
    assert by_name["attrs"] == T.MapType(T.StringType(), line, valueContainsNull=False)
    assert spark.names[:3] == ["id", "customer", "amount"]  # the declaration's order


@settings(max_examples=150, deadline=None)
@given(st.lists(orders, min_size=1, max_size=6))
def test_random_messages_decode_as_spark_reads_them(values):
    messages = [build(v) for v in values]
    got, errors = decoded(reader(ORDER), [m.SerializeToString() for m in messages])
    assert not errors.any()
    want = [expected(m) for m in messages]
    for g, w in zip(got, want, strict=True):
        g["attrs"] = dict(g["attrs"])
        assert g == w


def test_unpacked_repeated_numbers_and_a_repeated_singular_field_read_as_protobuf_does():
    msg = Order(qty=1, counts=[5, 6])
    raw = msg.SerializeToString()
    # the same numbers unpacked (each its own tag 23, wire type 0), and qty (5) given twice: the last wins
    unpacked = b"\x28\x01" + b"\xb8\x01\x05" + b"\xb8\x01\x06" + b"\x28\x07"
    got, errors = decoded(reader(ORDER), [raw, unpacked])
    assert not errors.any()
    assert (got[0]["qty"], got[0]["counts"]) == (1, [5, 6])
    assert (got[1]["qty"], got[1]["counts"]) == (7, [5, 6])


def test_writers_older_and_newer_read_by_field_number():
    old = message_class(order_file(with_legacy=True), "shop.Order")(id=1, legacy="x", customer="ann")
    new = message_class(order_file(with_legacy=False, with_note=True), "shop.Order")(id=2, note="hi", qty=3)
    got, errors = decoded(reader(order_file(with_legacy=False, with_note=True)),
                          [old.SerializeToString(), new.SerializeToString()])
    assert not errors.any()
    assert (got[0]["id"], got[0]["customer"], got[0]["note"]) == (1, "ann", None)  # legacy (3) skipped
    assert "legacy" not in got[0]
    assert (got[1]["id"], got[1]["note"], got[1]["qty"]) == (2, "hi", 3)


def test_a_field_of_another_wire_type_fails_its_record_in_the_root_message_only_and_an_open_enum_names_any():
    """As observed with from_protobuf of Spark's connector/protobuf sources: protobuf keeps a
    field in another wire type as an unknown field, which from_protobuf fails (MALFORMED_PROTOBUF_MESSAGE
    under FAILFAST, a null row under PERMISSIVE) when it is the root message's, and ignores in a
    nested message; a number a proto3 (open) enum lacks reads UNKNOWN_ENUM_VALUE_<Enum>_<n>."""
    # zip (2) of address (21) as a string instead of a varint: skipped; status 9: not in the enum
    nested = b"\x08\x01\xaa\x01\x03\x12\x01x\x90\x01\x09"
    root = b"\x08\x01\x10\x05"  # customer (2) as a varint instead of a string
    got, errors = decoded(reader(ORDER), [nested, root])
    assert list(errors) == [0, 7]
    assert (got[0]["id"], got[0]["address"], got[0]["status"]) == (
        1, {"street": None, "zip": None}, "UNKNOWN_ENUM_VALUE_Status_9")
    assert got[1] is None
    assert unknown_fields.UnknownFieldSet(Order.FromString(root))[0].field_number == 2  # as protobuf keeps it


def test_a_record_that_does_not_decode_is_a_null_row_and_its_neighbours_are_untouched():
    good = Order(id=5, tags=["a"], lines=[Order.Line(sku="s")]).SerializeToString()
    cut = good[:-2]  # inside the last line: its length runs past the message
    bad_wire = b"\x0f\x01"  # field 1, wire type 7
    long_varint = b"\x08" + b"\xff" * 11
    group = b"\x0b\x08\x01"  # a group (3) never closed
    got, errors = decoded(reader(ORDER), [good, cut, bad_wire, long_varint, group, good])
    assert [pp.ERRORS.get(int(e)) for e in errors] == [
        None, pp.ERRORS[4], pp.ERRORS[3], pp.ERRORS[2], pp.ERRORS[1], None]
    assert got[1:5] == [None] * 4
    assert got[0] == got[5] and got[0]["lines"] == [{"sku": "s", "n": None}]


def test_message_indexes_of_confluents_framing():
    def indexes(*xs: int) -> bytes:
        def zigzag(v: int) -> bytes:
            v = (v << 1) ^ (v >> 63)
            out = bytearray()
            while v > 0x7F:
                out.append((v & 0x7F) | 0x80)
                v >>= 7
            return bytes(out + bytes([v]))
        return zigzag(len(xs)) + b"".join(zigzag(x) for x in xs)

    frames = [b"\x00\x08\x01", indexes(0) + b"\x08\x01", indexes(1, 2) + b"", indexes(1, 2, 3, 4, 5), b"\x04"]
    data = np.frombuffer(b"".join(frames), np.uint8)
    lengths = np.array([len(f) for f in frames], np.int64)
    ends = np.cumsum(lengths)
    keys, starts = pp.message_keys(ends - lengths, ends, data)
    assert [pp.indexes_of(int(k)) for k in keys[:3]] == [(0,), (0,), (1, 2)]
    assert keys[3] == pp.KEY_OTHER and keys[4] == pp.KEY_BAD
    assert list(starts[:3] - (ends - lengths)[:3]) == [1, 2, 3]


def test_the_message_at_indexes_and_by_name():
    file = pt.load_file(base64.b64encode(ORDER.SerializeToString()).decode(), lambda _n: None)
    assert pt.message_at(file, (0,)) == "shop.Order"
    assert pt.message_at(file, (0, 1)) == "shop.Order.Line"
    assert pt.message_at(file, (3,)) is None
    assert pt.message(file, "Order.Line").full_name == "shop.Order.Line"
    with pytest.raises(pt.ProtobufSchemaError, match=r"no message 'Nope'.*shop\.Order, shop\.Order\.Address"):
        pt.message(file, "Nope")


def test_recursive_messages_groups_and_other_text_are_refused():
    fdp = descriptor_pb2.FileDescriptorProto(name="tree.proto", package="t", syntax="proto3")
    node = fdp.message_type.add(name="Node")
    node.field.add(name="child", number=1, type=F.TYPE_MESSAGE, type_name=".t.Node", label=OPTIONAL)
    file = pt.load_file(base64.b64encode(fdp.SerializeToString()).decode(), lambda _n: None)
    with pytest.raises(pt.ProtobufSchemaError, match=r"t\.Node is recursive"):
        pt.spark_type(pt.message(file, None))
    with pytest.raises(pt.ProtobufSchemaError, match=r"neither a serialized descriptor .* nor \.proto text"):
        pt.load_file("not a schema", lambda _n: None)
    fdp = descriptor_pb2.FileDescriptorProto(name="uses.proto", syntax="proto3", dependency=["other.proto"])
    with pytest.raises(pt.ProtobufSchemaError, match=r"imports 'other\.proto', which is none of its refer"):
        pt.load_file(base64.b64encode(fdp.SerializeToString()).decode(), lambda _n: None)


def test_a_file_set_carries_imports_to_a_worker():
    dep = descriptor_pb2.FileDescriptorProto(name="common/money.proto", package="common", syntax="proto3")
    dep.message_type.add(name="Money").field.add(name="cents", number=1, type=F.TYPE_INT64, label=OPTIONAL)
    main = descriptor_pb2.FileDescriptorProto(
        name="pay.proto", package="pay", syntax="proto3",
        dependency=["common/money.proto", "google/protobuf/timestamp.proto"])
    pay = main.message_type.add(name="Payment")
    pay.field.add(name="amount", number=1, type=F.TYPE_MESSAGE, type_name=".common.Money", label=OPTIONAL)
    texts = {"common/money.proto": base64.b64encode(dep.SerializeToString()).decode()}
    file = pt.load_file(base64.b64encode(main.SerializeToString()).decode(), texts.get)
    again = pt.load_set(pt.file_set(file))
    assert pt.spark_type(pt.message(again, None)).simpleString() == "struct<amount:struct<cents:bigint>>"


# -- proto2 defaults ------------------------------------------------------------------------------

ITEM = defaults_file()
Item = message_class(ITEM, "shop.Item")
Part = type(Item().part)
PART_DEFAULTS = {"name": "part", "weight": 12345678901, "size": "MEDIUM", "note": None}
ITEM_DEFAULTS = {"qty": -7, "big": -9000000000, "huge": -1, "ratio": 0.10000000149011612,
                 "price": float("-inf"), "gift": True, "label": "h\u00e9llo", "code": b"\x00\xffab",
                 "u32": -1, "zag": -3, "zero": 0, "size": "LARGE", "plain": None, "plain_size": None,
                 "part": None, "parts": [], "by_name": [], "pick_n": 5, "pick_s": None,
                 "alias_size": "BIG"}


def test_an_absent_proto2_field_with_a_declared_default_reads_it_as_from_protobuf_does():
    present = Item(qty=1, big=2, huge=3, ratio=1.5, price=2.5, gift=False, label="", code=b"", u32=4, zag=0,
                   zero=0, size=0, plain=0, plain_size=2)
    nested = Item(part=Part(), parts=[Part(name="x", size=0), Part()], by_name={"a": Part(note="n")},
                  pick_s="z")
    entry_without_value = b"\x8a\x01\x03\x0a\x01k"  # by_name (17): an entry with only its key
    got, errors = decoded(reader(ITEM, "shop.Item"), [
        b"", present.SerializeToString(), nested.SerializeToString(), entry_without_value, b"\x0f"])
    assert list(errors) == [0, 0, 0, 0, 3]
    assert got[0] == ITEM_DEFAULTS  # every field absent: the declared defaults, the others null
    assert got[1] == {**ITEM_DEFAULTS, "qty": 1, "big": 2, "huge": 3, "ratio": 1.5, "price": 2.5,
                      "gift": False, "label": "", "code": b"", "u32": 4, "zag": 0, "zero": 0,
                      "size": "SMALL", "plain": 0, "plain_size": "LARGE"}  # present: as written
    # (plain_size 2 has two names, LARGE and BIG: the first, as Java finds a number's value)
    assert got[2] == {**ITEM_DEFAULTS, "part": PART_DEFAULTS, "pick_s": "z",  # the other oneof member: 5
                      "parts": [{**PART_DEFAULTS, "name": "x", "size": "SMALL"}, PART_DEFAULTS],
                      "by_name": [("a", {**PART_DEFAULTS, "note": "n"})]}
    assert got[3]["by_name"] == [("k", PART_DEFAULTS)]  # a missing map value: its message's defaults
    assert got[4] is None  # a record that does not decode stays a null row


def test_a_default_is_filled_only_where_its_message_is_present():
    program = reader(ITEM, "shop.Item")
    payloads = [b"", Item(part=Part(name="p")).SerializeToString(), b"\x0f"]
    data = np.frombuffer(b"".join(payloads), np.uint8)
    ends = np.cumsum([len(p) for p in payloads])
    array, _errors = pp.decode(program, ends - [len(p) for p in payloads], ends, data)
    assert array.field("qty").to_pylist() == [-7, -7, None]  # the null row's column stays null
    assert array.field("part").field("size").to_pylist() == [None, "MEDIUM", None]  # no Part: no default


def test_the_declared_default_as_spark_holds_it():
    fields = Item.DESCRIPTOR.fields_by_name
    assert pt.default_value(fields["huge"]) == -1 and pt.default_value(fields["u32"]) == -1
    assert pt.default_value(fields["size"]) == "LARGE"
    # a default naming an alias keeps its name (Google's runtime has only the number, LARGE's)
    file = pt.load_file(base64.b64encode(ITEM.SerializeToString()).decode(), lambda _n: None)
    assert Item.DESCRIPTOR.fields_by_name["alias_size"].default_value == 2
    assert pt.default_value(pt.message(file, "shop.Item").fields_by_name["alias_size"]) == "BIG"
    again = pt.load_set(pt.file_set(file))  # as a worker builds it
    assert pt.default_value(pt.message(again, "shop.Item").fields_by_name["alias_size"]) == "BIG"
    assert pt.default_value(fields["code"]) == b"\x00\xffab"  # C escapes parsed
    assert pt.default_value(fields["zero"]) == 0
    assert pt.default_value(fields["plain"]) is None and pt.default_value(fields["plain_size"]) is None
    assert pt.default_value(fields["part"]) is None and pt.default_value(fields["parts"]) is None
    assert pt.default_value(Order.DESCRIPTOR.fields_by_name["qty"]) is None  # proto3: none declared


sizes = st.sampled_from([0, 1, 2])
uint64s = st.integers(0, 2**64 - 1)
parts = st.fixed_dictionaries({}, optional={"name": texts, "weight": uint64s, "size": sizes, "note": texts})
items = st.fixed_dictionaries({}, optional={
    "qty": int32s, "big": int64s, "huge": uint64s, "ratio": st.floats(width=32, allow_nan=False),
    "price": st.floats(allow_nan=False), "gift": st.booleans(), "label": texts, "code": st.binary(max_size=4),
    "u32": st.integers(0, 2**32 - 1), "zag": int32s, "zero": int32s, "size": sizes, "plain": int32s,
    "plain_size": sizes, "part": parts, "parts": st.lists(parts, max_size=3),
    "by_name": st.dictionaries(texts, parts, max_size=2), "pick_n": int32s, "pick_s": texts,
    "alias_size": sizes})


def build_item(values: dict):
    msg = Item()
    for name, value in values.items():
        if name == "part":
            msg.part.SetInParent()
            msg.part.MergeFrom(Part(**value))
        elif name == "parts":
            msg.parts.extend(Part(**v) for v in value)
        elif name == "by_name":
            for k, v in value.items():
                msg.by_name[k].CopyFrom(Part(**v))
        else:
            setattr(msg, name, value)  # of pick_n and pick_s, the last set wins, as in protobuf
    return msg


@settings(max_examples=150, deadline=None)
@given(st.lists(items, min_size=1, max_size=6))
def test_random_proto2_messages_with_defaults_decode_as_spark_reads_them(values):
    messages = [build_item(v) for v in values]
    got, errors = decoded(reader(ITEM, "shop.Item"), [m.SerializeToString() for m in messages])
    assert not errors.any()
    for g, w in zip(got, [expected(m) for m in messages], strict=True):
        g["by_name"] = dict(g["by_name"])
        assert g == w


def test_an_enum_default_naming_an_alias_reads_as_that_name_absent_and_as_the_first_name_present():
    """As observed with from_protobuf of Spark's connector/protobuf sources: Size's LARGE and BIG
    share 2; a field declaring ``[default = BIG]`` reads BIG when absent (Java parses the default
    by name) and LARGE when 2 is on the wire (Java finds a number's first value)."""
    got, errors = decoded(reader(ITEM, "shop.Item"), [b"", Item(alias_size=2).SerializeToString()])
    assert not errors.any()
    assert [g["alias_size"] for g in got] == ["BIG", "LARGE"]


# -- proto2: closed enums, required fields, oneofs -------------------------------------------------

BOX = closed_file()
Box = message_class(BOX, "shop.Box")
Writer = message_class(closed_file(writer=True), "shop.Box")
WriterInner = type(Writer().inner)
CLOSED, REQUIRED = 7, 8
"""The decoder's codes for a record from_protobuf fails: an unknown field of the root message's,
a required field missing."""


def box_reader() -> pp.Program:
    return reader(BOX, "shop.Box")


def test_a_number_a_closed_enum_lacks_fails_its_record_in_the_root_message_and_is_absent_below():
    """As observed with from_protobuf of Spark's connector/protobuf sources (proto2, a closed
    enum): protobuf keeps a number the enum does not define as an unknown field. In the root
    message from_protobuf fails the record (MALFORMED_PROTOBUF_MESSAGE under FAILFAST, a null row
    under PERMISSIVE) — singular, repeated or packed, with a default, in a oneof, before or after
    a known number; below it the field is absent: null, or its declared default, the last known
    number kept, and an array element is left out."""
    # below the root: c 2 then 6 (6 ignored), cs 9 left out, cd 7 absent (its default)
    inner = (WriterInner(n=1, c=2, cs=[1, 9, 5], cd=7).SerializeToString()
             + WriterInner(c=6).SerializeToString())
    payloads = [
        Writer(id="a", c=4).SerializeToString(),  # c 4: not a Color
        Writer(id="a", cs=[1, 4, 5]).SerializeToString(),  # unpacked
        Writer(id="a", cd=-1).SerializeToString(),
        Writer(id="a", pc=0).SerializeToString(),  # a oneof member
        Writer(id="a", c=2).SerializeToString() + Writer(c=3).SerializeToString(),  # known, then not
        Writer(id="a").SerializeToString() + b"\x2a" + bytes([len(inner)]) + inner,  # inner (5)
        Writer(id="a", inners=[WriterInner(n=1, c=3), WriterInner(n=2, c=5)]).SerializeToString(),
    ]
    got, errors = decoded(box_reader(), payloads)
    assert list(errors) == [CLOSED] * 5 + [0, 0]
    assert got[:5] == [None] * 5
    # Google's runtime the same: the root's unknown fields have the message's numbers
    kept = [[f.field_number for f in unknown_fields.UnknownFieldSet(Box.FromString(p))] for p in payloads[:5]]
    assert kept == [[2], [3], [4], [8], [2]]
    assert got[5]["inner"] == {"n": 1, "c": "GREEN", "cs": ["RED", "BLUE"], "cd": "GREEN"}
    assert got[5]["inner"] == expected(Box.FromString(payloads[5]))["inner"]  # as Google's runtime reads it
    assert got[6]["inners"] == [{"n": 1, "c": None, "cs": [], "cd": "GREEN"},
                                {"n": 2, "c": "BLUE", "cs": [], "cd": "GREEN"}]


def test_a_map_value_a_closed_enum_lacks_keeps_its_entry_with_the_enums_first_value():
    """As observed with from_protobuf of Spark's connector/protobuf sources: Java keeps a map
    entry whose closed-enum value is unknown, with the value's default (the enum's first value),
    where Google's Python runtime drops the entry into the unknown fields."""
    payload = Writer(id="a", by_name={"k": 7, "j": 1}).SerializeToString()
    got, errors = decoded(box_reader(), [payload])
    assert not errors.any()
    assert dict(got[0]["by_name"]) == {"k": "QUIET", "j": "LOUD"}
    assert dict(Box.FromString(payload).by_name) == {"j": 1}  # Python's runtime: not this


def test_a_required_field_missing_fails_its_record_wherever_it_is():
    """As observed with from_protobuf of Spark's connector/protobuf sources: protobuf-java does
    not parse a message missing a required field, in the root message or any message below it (a
    nested one, an array's, a map's), and from_protobuf fails the record ("Message missing required
    fields: …": MALFORMED_PROTOBUF_MESSAGE under FAILFAST, a null row under PERMISSIVE); a message
    that is absent is not checked."""
    payloads = [
        Writer(c=1).SerializeToString(),  # id (1) missing
        b"",
        Writer(id="a", inner=WriterInner(c=1)).SerializeToString(),  # inner.n missing
        Writer(id="a", inners=[WriterInner(n=1), WriterInner()]).SerializeToString(),
        Writer(id="a").SerializeToString(),  # inner absent: not checked
        Writer(id="a", inners=[WriterInner(n=0)]).SerializeToString(),
    ]
    got, errors = decoded(box_reader(), payloads)
    assert list(errors) == [REQUIRED] * 4 + [0, 0]
    assert [Box.FromString(p).IsInitialized() for p in payloads] == [False] * 4 + [True] * 2
    assert got[4]["id"] == "a" and got[5]["inners"] == [{"n": 0, "c": None, "cs": [], "cd": "GREEN"}]


def test_a_oneof_member_clears_the_others_and_one_with_a_default_reads_it_when_another_is_set():
    """As observed with from_protobuf of Spark's connector/protobuf sources: of a oneof's members
    on the wire the last one is set (protobuf clears the others), and a member that declares a
    default reads it when another member is set; a number the closed enum lacks does not set its
    member (nor clear the others)."""
    payloads = [
        Writer(id="a", pn=8).SerializeToString() + Writer(ps="z").SerializeToString(),
        Writer(id="a", ps="z").SerializeToString() + Writer(pn=8).SerializeToString(),
        Writer(id="a", ps="z").SerializeToString() + Writer(pc=2).SerializeToString(),
        Writer(id="a", inners=[WriterInner(n=1)]).SerializeToString(),
    ]
    got, errors = decoded(box_reader(), payloads)
    assert not errors.any()
    assert [(g["pn"], g["pc"], g["ps"]) for g in got] == [
        (5, None, "z"), (8, None, None), (5, "GREEN", None), (5, None, None)]
    assert [Box.FromString(p).WhichOneof("pick") for p in payloads] == ["ps", "pn", "pc", None]


colors = st.sampled_from([-1, 0, 1, 2, 3, 5])  # Color defines 1, 2 and 5
inner_values = st.fixed_dictionaries({}, optional={
    "n": int32s, "c": colors, "cs": st.lists(colors, max_size=3), "cd": colors})
boxes = st.fixed_dictionaries({}, optional={
    "id": texts, "c": colors, "cs": st.lists(colors, max_size=3), "cd": colors, "inner": inner_values,
    "inners": st.lists(inner_values, max_size=2), "pn": int32s, "pc": colors, "ps": texts})


def build_box(values: dict):
    msg = Writer()
    for name, value in values.items():
        if name == "inner":
            msg.inner.SetInParent()
            msg.inner.MergeFrom(WriterInner(**value))
        elif name == "inners":
            msg.inners.extend(WriterInner(**v) for v in value)
        elif name == "cs":
            msg.cs.extend(value)
        else:
            setattr(msg, name, value)
    return msg


@settings(max_examples=150, deadline=None)
@given(st.lists(boxes, min_size=1, max_size=6))
def test_random_proto2_messages_with_closed_enums_and_required_fields_decode_as_spark_reads_them(values):
    """Google's runtime writes numbers Color lacks and messages without their required fields
    (a writer whose enums are int32 and whose fields are optional), and reads them with the
    reader's message: a record whose root message keeps an unknown field of one of its numbers,
    or that misses a required field (checked first), is one from_protobuf fails (both as observed with
    from_protobuf of Spark's connector/protobuf sources); the others read as from_protobuf reads
    what Google's runtime parsed."""
    payloads = [build_box(v).SerializeToString() for v in values]
    got, errors = decoded(box_reader(), payloads)
    for payload, g, e in zip(payloads, got, errors, strict=True):
        msg = Box.FromString(payload)
        numbers = {f.number for f in Box.DESCRIPTOR.fields}
        if not msg.IsInitialized():  # protobuf-java does not parse it: checked first
            assert (e, g) == (REQUIRED, None)
        elif any(f.field_number in numbers for f in unknown_fields.UnknownFieldSet(msg)):
            assert (e, g) == (CLOSED, None)
        else:
            assert e == 0
            g["by_name"] = dict(g["by_name"])
            assert g == expected(msg)


def test_an_open_enum_a_proto2_field_uses_reads_as_closed_and_a_field_left_out_keeps_its_number():
    """As observed with from_protobuf of Spark's connector/protobuf sources: protobuf-java reads
    an enum field of a proto2 file as closed even when its enum is a proto3 (open) one (Google's
    Python runtime keeps the number): 7 fails the record in the root message, and is absent below
    it; a field of the root message that Spark's type leaves out (a message without fields) is
    still one of the root's numbers, so in another wire type it fails the record too."""
    state = descriptor_pb2.FileDescriptorProto(name="shop/state.proto", package="shop", syntax="proto3")
    values = state.enum_type.add(name="State")
    values.value.add(name="NONE", number=0)
    values.value.add(name="ON", number=1)
    mixed = descriptor_pb2.FileDescriptorProto(name="shop/mixed.proto", package="shop", syntax="proto2",
                                               dependency=["shop/state.proto"])
    m = mixed.message_type.add(name="Mixed")
    m.field.add(name="s", number=1, type=F.TYPE_ENUM, type_name=".shop.State", label=OPTIONAL)
    m.field.add(name="e", number=2, type=F.TYPE_MESSAGE, type_name=".shop.Empty", label=OPTIONAL)
    m.field.add(name="x", number=3, type=F.TYPE_INT32, label=OPTIONAL)
    m.field.add(name="h", number=4, type=F.TYPE_MESSAGE, type_name=".shop.Holder", label=OPTIONAL)
    mixed.message_type.add(name="Empty")
    mixed.message_type.add(name="Holder").field.add(name="s", number=1, type=F.TYPE_ENUM,
                                                    type_name=".shop.State", label=OPTIONAL)
    texts = {"shop/state.proto": base64.b64encode(state.SerializeToString()).decode()}
    file = pt.load_file(base64.b64encode(mixed.SerializeToString()).decode(), texts.get)
    Mixed = message_factory.GetMessageClass(file.pool.FindMessageTypeByName("shop.Mixed"))
    Holder = message_factory.GetMessageClass(file.pool.FindMessageTypeByName("shop.Holder"))
    payloads = [Mixed(s=7).SerializeToString(), Mixed(h=Holder(s=7), x=1).SerializeToString(),
                Mixed(s=1).SerializeToString(), b"\x10\x01\x18\x04", Mixed(e={}, x=4).SerializeToString()]
    assert Mixed.FromString(payloads[0]).s == 7  # Google's Python runtime: open
    got, errors = decoded(pp.compile_program(pt.message(file, "shop.Mixed")), payloads)
    assert list(errors) == [CLOSED, 0, 0, CLOSED, 0]
    assert got[1] == {"s": None, "x": 1, "h": {"s": None}}
    assert got[2]["s"] == "ON" and got[4] == {"s": None, "x": 4, "h": None}
    assert pt.spark_type(pt.message(file, "shop.Mixed")).names == ["s", "x", "h"]


def test_a_timestamp_or_duration_past_64_bit_microseconds_is_a_malformed_row_not_a_wrapped_value():
    def order(placed: tuple[int, int] | None = None, took: tuple[int, int] | None = None) -> bytes:
        msg = Order(id=5, tags=["a"])
        if placed:
            msg.placed.seconds, msg.placed.nanos = placed
        if took:
            msg.took.seconds, msg.took.nanos = took
        return msg.SerializeToString()

    edge = 2**63 // 10**6  # seconds: 9223372036854, whose microseconds fit with up to 775807 more
    good = order((1767225600, 5000))
    payloads = [good, order(placed=(9_300_000_000_000, 0)), good, order(took=(-9_300_000_000_000, 0)), good,
                order(placed=(edge, 775_808_000)), good,
                order(placed=(edge, 775_807_000), took=(-edge, -775_808_000))]
    data = np.frombuffer(b"".join(payloads), np.uint8)
    ends = np.cumsum([len(p) for p in payloads])
    array, errors = pp.decode(reader(ORDER), ends - [len(p) for p in payloads], ends, data)
    assert [pp.ERRORS.get(int(e)) for e in errors] == [None, pp.ERRORS[10]] * 3 + [None, None]
    assert array.is_null().to_pylist() == [False, True] * 3 + [False, False]
    placed = array.field("placed").cast(pa.int64()).to_pylist()
    took = array.field("took").cast(pa.int64()).to_pylist()
    assert placed[0::2] == [1767225600000005] * 4 and placed[-1] == 2**63 - 1
    assert took[-1] == -(2**63)
