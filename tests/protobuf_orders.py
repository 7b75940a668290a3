"""A realistic Protobuf schema for the tests, built as descriptors (no protoc here): the
messages of ``shop/order.proto`` in two versions, and their generated-like classes."""

from __future__ import annotations

import base64

from google.protobuf import descriptor_pb2, descriptor_pool, duration_pb2, message_factory, timestamp_pb2

F = descriptor_pb2.FieldDescriptorProto
OPTIONAL, REPEATED = F.LABEL_OPTIONAL, F.LABEL_REPEATED


def order_file(*, with_legacy: bool = True, with_note: bool = False) -> descriptor_pb2.FileDescriptorProto:
    """shop.Order: scalars of every wire type, a proto3 optional, an enum, a nested message,
    repeated (packed and not), a map with message values, a timestamp and a duration."""
    fdp = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3")
    fdp.dependency.extend(["google/protobuf/timestamp.proto", "google/protobuf/duration.proto"])
    status = fdp.enum_type.add(name="Status")
    for i, name in enumerate(["NEW", "PAID", "SHIPPED"]):
        status.value.add(name=name, number=i)
    m = fdp.message_type.add(name="Order")
    fields = [("id", 1, F.TYPE_INT64), ("customer", 2, F.TYPE_STRING), ("amount", 4, F.TYPE_DOUBLE),
              ("qty", 5, F.TYPE_INT32), ("score", 7, F.TYPE_FLOAT), ("paid", 8, F.TYPE_BOOL),
              ("delta", 9, F.TYPE_SINT64), ("small", 10, F.TYPE_SINT32), ("u32", 11, F.TYPE_UINT32),
              ("u64", 12, F.TYPE_UINT64), ("f32", 13, F.TYPE_FIXED32), ("f64", 14, F.TYPE_FIXED64),
              ("s32", 15, F.TYPE_SFIXED32), ("s64", 16, F.TYPE_SFIXED64), ("blob", 17, F.TYPE_BYTES)]
    for name, number, kind in fields:
        m.field.add(name=name, number=number, type=kind, label=OPTIONAL)
    if with_legacy:
        m.field.add(name="legacy", number=3, type=F.TYPE_STRING, label=OPTIONAL)
    m.field.add(name="status", number=18, type=F.TYPE_ENUM, type_name=".shop.Status", label=OPTIONAL)
    m.field.add(name="placed", number=19, type=F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp",
                label=OPTIONAL)
    m.field.add(name="took", number=20, type=F.TYPE_MESSAGE, type_name=".google.protobuf.Duration",
                label=OPTIONAL)
    m.field.add(name="address", number=21, type=F.TYPE_MESSAGE, type_name=".shop.Order.Address",
                label=OPTIONAL)
    m.field.add(name="tags", number=22, type=F.TYPE_STRING, label=REPEATED)
    m.field.add(name="counts", number=23, type=F.TYPE_INT32, label=REPEATED)  # packed (proto3's default)
    m.field.add(name="lines", number=24, type=F.TYPE_MESSAGE, type_name=".shop.Order.Line", label=REPEATED)
    m.field.add(name="attrs", number=25, type=F.TYPE_MESSAGE, type_name=".shop.Order.AttrsEntry",
                label=REPEATED)
    m.field.add(name="maybe", number=26, type=F.TYPE_INT32, label=OPTIONAL, proto3_optional=True,
                oneof_index=0)
    m.oneof_decl.add(name="_maybe")
    if with_note:
        m.field.add(name="note", number=30, type=F.TYPE_STRING, label=OPTIONAL)
    address = m.nested_type.add(name="Address")
    address.field.add(name="street", number=1, type=F.TYPE_STRING, label=OPTIONAL)
    address.field.add(name="zip", number=2, type=F.TYPE_INT32, label=OPTIONAL)
    line = m.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=F.TYPE_STRING, label=OPTIONAL)
    line.field.add(name="n", number=2, type=F.TYPE_UINT32, label=OPTIONAL)
    entry = m.nested_type.add(name="AttrsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_MESSAGE, type_name=".shop.Order.Line", label=OPTIONAL)
    return fdp


def message_class(fdp: descriptor_pb2.FileDescriptorProto, name: str = "shop.Order"):
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.AddSerializedFile(duration_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def serialized(fdp: descriptor_pb2.FileDescriptorProto) -> str:
    """The file as a registry holds it: a base64 FileDescriptorProto."""
    return base64.b64encode(fdp.SerializeToString()).decode()


def defaults_file() -> descriptor_pb2.FileDescriptorProto:
    """shop/item.proto (proto2): shop.Item, whose fields declare defaults of every kind (and a
    few declare none), with a nested message, repeated and map values whose fields declare
    defaults too, and a oneof member with a default; Size has an alias (BIG is LARGE's number),
    which a default names."""
    fdp = descriptor_pb2.FileDescriptorProto(name="shop/item.proto", package="shop", syntax="proto2")
    size = fdp.enum_type.add(name="Size")
    size.options.allow_alias = True
    for name, number in [("SMALL", 0), ("MEDIUM", 1), ("LARGE", 2), ("BIG", 2)]:
        size.value.add(name=name, number=number)
    part = fdp.message_type.add(name="Part")
    part.field.add(name="name", number=1, type=F.TYPE_STRING, label=OPTIONAL, default_value="part")
    part.field.add(name="weight", number=2, type=F.TYPE_FIXED64, label=OPTIONAL, default_value="12345678901")
    part.field.add(name="size", number=3, type=F.TYPE_ENUM, type_name=".shop.Size", label=OPTIONAL,
                   default_value="MEDIUM")
    part.field.add(name="note", number=4, type=F.TYPE_STRING, label=OPTIONAL)
    m = fdp.message_type.add(name="Item")
    defaults = [("qty", 1, F.TYPE_INT32, "-7"), ("big", 2, F.TYPE_INT64, "-9000000000"),
                ("huge", 3, F.TYPE_UINT64, "18446744073709551615"), ("ratio", 4, F.TYPE_FLOAT, "0.1"),
                ("price", 5, F.TYPE_DOUBLE, "-inf"), ("gift", 6, F.TYPE_BOOL, "true"),
                ("label", 7, F.TYPE_STRING, "h\u00e9llo"), ("code", 8, F.TYPE_BYTES, "\\000\\377ab"),
                ("u32", 9, F.TYPE_UINT32, "4294967295"), ("zag", 10, F.TYPE_SINT32, "-3"),
                ("zero", 11, F.TYPE_INT32, "0")]
    for name, number, kind, default in defaults:
        m.field.add(name=name, number=number, type=kind, label=OPTIONAL, default_value=default)
    m.field.add(name="size", number=12, type=F.TYPE_ENUM, type_name=".shop.Size", label=OPTIONAL,
                default_value="LARGE")
    m.field.add(name="plain", number=13, type=F.TYPE_INT32, label=OPTIONAL)  # no default: null
    m.field.add(name="plain_size", number=14, type=F.TYPE_ENUM, type_name=".shop.Size", label=OPTIONAL)
    m.field.add(name="part", number=15, type=F.TYPE_MESSAGE, type_name=".shop.Part", label=OPTIONAL)
    m.field.add(name="parts", number=16, type=F.TYPE_MESSAGE, type_name=".shop.Part", label=REPEATED)
    m.field.add(name="by_name", number=17, type=F.TYPE_MESSAGE, type_name=".shop.Item.ByNameEntry",
                label=REPEATED)
    m.field.add(name="pick_n", number=18, type=F.TYPE_INT32, label=OPTIONAL, default_value="5", oneof_index=0)
    m.field.add(name="pick_s", number=19, type=F.TYPE_STRING, label=OPTIONAL, oneof_index=0)
    m.oneof_decl.add(name="pick")
    m.field.add(name="alias_size", number=20, type=F.TYPE_ENUM, type_name=".shop.Size", label=OPTIONAL,
                default_value="BIG")  # an alias of LARGE
    entry = m.nested_type.add(name="ByNameEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_MESSAGE, type_name=".shop.Part", label=OPTIONAL)
    return fdp


def closed_file(*, writer: bool = False) -> descriptor_pb2.FileDescriptorProto:
    """shop/box.proto (proto2): shop.Box and shop.Box.Inner with a closed enum (Color, whose
    first value is not 0) singular, repeated (packed and not), with a default and in a oneof, a
    map whose values are a closed enum (Tone), and required fields. ``writer``: the same message
    as a writer that knows no enum (its fields int32, the same wire type) and no required field
    (optional), so that Google's runtime writes numbers Color lacks and messages without the
    required fields."""
    fdp = descriptor_pb2.FileDescriptorProto(name="shop/box.proto", package="shop", syntax="proto2")
    color = fdp.enum_type.add(name="Color")
    for name, number in [("GREEN", 2), ("RED", 1), ("BLUE", 5)]:
        color.value.add(name=name, number=number)
    tone = fdp.enum_type.add(name="Tone")  # a map's value: its first value must be 0
    for name, number in [("QUIET", 0), ("LOUD", 1)]:
        tone.value.add(name=name, number=number)
    required = OPTIONAL if writer else F.LABEL_REQUIRED

    def enum(m, name: str, number: int, label: int = OPTIONAL, type_name: str = ".shop.Color", **extra):
        if writer:
            extra.pop("default_value", None)
            return m.field.add(name=name, number=number, type=F.TYPE_INT32, label=label, **extra)
        return m.field.add(name=name, number=number, type=F.TYPE_ENUM, type_name=type_name, label=label,
                           **extra)

    box = fdp.message_type.add(name="Box")
    box.field.add(name="id", number=1, type=F.TYPE_STRING, label=required)
    enum(box, "c", 2)
    enum(box, "cs", 3, REPEATED)
    enum(box, "cd", 4, default_value="BLUE")
    box.field.add(name="inner", number=5, type=F.TYPE_MESSAGE, type_name=".shop.Box.Inner", label=OPTIONAL)
    box.field.add(name="inners", number=6, type=F.TYPE_MESSAGE, type_name=".shop.Box.Inner", label=REPEATED)
    box.field.add(name="pn", number=7, type=F.TYPE_INT32, label=OPTIONAL, default_value="5", oneof_index=0)
    enum(box, "pc", 8, oneof_index=0)
    box.field.add(name="ps", number=9, type=F.TYPE_STRING, label=OPTIONAL, oneof_index=0)
    box.field.add(name="by_name", number=10, type=F.TYPE_MESSAGE, type_name=".shop.Box.ByNameEntry",
                  label=REPEATED)
    box.oneof_decl.add(name="pick")
    inner = box.nested_type.add(name="Inner")
    inner.field.add(name="n", number=1, type=F.TYPE_INT32, label=required)
    enum(inner, "c", 2)
    enum(inner, "cs", 3, REPEATED).options.packed = True
    enum(inner, "cd", 4, default_value="GREEN")
    entry = box.nested_type.add(name="ByNameEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=OPTIONAL)
    enum(entry, "value", 2, type_name=".shop.Tone")
    return fdp
