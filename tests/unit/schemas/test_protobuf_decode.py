"""The native Protobuf decoder against Google's protobuf runtime, the reference: random messages
of a realistic schema, serialized by protobuf itself, decode to the values Spark's
``from_protobuf`` gives them (an absent field null, a proto3 default null, repeated and map
fields empty, enums by name, timestamps in microseconds); a newer or older writer reads by field
number; Confluent's message indexes are read; a record that does not decode is a null row with
its reason and the records around it are untouched; recursive messages and groups are refused."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from google.protobuf import descriptor_pb2
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

from jetspark.schemas import protobuf_program as pp
from jetspark.schemas import protobuf_types as pt
from tests.protobuf_orders import OPTIONAL, message_class, order_file

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
            out[f.name] = [expected(v) if f.message_type else _signed(f, v) for v in value]
        elif f.has_presence and not msg.HasField(f.name):
            out[f.name] = None
        elif f.message_type is not None and f.message_type.name == "Timestamp":
            out[f.name] = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=value.ToMicroseconds())
        elif f.message_type is not None and f.message_type.name == "Duration":
            out[f.name] = timedelta(microseconds=value.ToMicroseconds())
        elif f.message_type is not None:
            out[f.name] = expected(value)
        elif f.enum_type is not None:
            out[f.name] = f.enum_type.values_by_number[value].name if value else None
        elif not f.has_presence and value == f.default_value and str(value) != "-0.0":
            out[f.name] = None  # a default is absent on the wire (-0.0 is not: not the default's bits)
        else:
            out[f.name] = _signed(f, value)
    return out


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


def test_a_field_of_another_wire_type_is_skipped_and_an_unknown_enum_number_is_named():
    # customer (2) as a varint instead of a string: unknown to the reader, skipped; status 9: not in the enum
    got, errors = decoded(reader(ORDER), [b"\x08\x01\x10\x05\x90\x01\x09"])
    assert not errors.any()
    assert (got[0]["id"], got[0]["customer"], got[0]["status"]) == (1, None, "UNKNOWN_ENUM_VALUE_Status_9")


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


def test_recursive_messages_groups_and_proto_text_are_refused():
    fdp = descriptor_pb2.FileDescriptorProto(name="tree.proto", package="t", syntax="proto3")
    node = fdp.message_type.add(name="Node")
    node.field.add(name="child", number=1, type=F.TYPE_MESSAGE, type_name=".t.Node", label=OPTIONAL)
    file = pt.load_file(base64.b64encode(fdp.SerializeToString()).decode(), lambda _n: None)
    with pytest.raises(pt.ProtobufSchemaError, match=r"t\.Node is recursive"):
        pt.spark_type(pt.message(file, None))
    with pytest.raises(pt.ProtobufSchemaError, match=r"\.proto text, not a serialized descriptor"):
        pt.load_file('syntax = "proto3"; message A { int32 a = 1; }', lambda _n: None)
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
