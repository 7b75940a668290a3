"""``.proto`` text schemas compiled with protoc: the file and its imports (text or serialized
references, Google's well-known files) give the same messages as a serialized schema, the
result travels to the workers as a descriptor set, and what does not compile, a missing
reference, an import outside the folder and a missing compiler are refused, naming why."""

from __future__ import annotations

import base64
import sys

import numpy as np
import pytest
from google.protobuf import descriptor_pb2, message_factory

from jetspark.schemas import protobuf_program as pp
from jetspark.schemas import protobuf_text
from jetspark.schemas import protobuf_types as pt

MONEY = 'syntax = "proto3";\npackage shop.common;\nmessage Money { int64 cents = 1; string currency = 2; }\n'
ORDER = """// an order
syntax = "proto3";
package shop;
import "common/money.proto";
import "google/protobuf/timestamp.proto";
/* import "commented/out.proto"; */
message Order {
  enum Status { NEW = 0; PAID = 1; }
  string id = 1;
  shop.common.Money total = 2;
  map<string, int32> counts = 3;
  Status status = 4;
  google.protobuf.Timestamp placed = 5;
}
"""


def _load(text: str, references: dict[str, str]):
    return pt.load_file(text, references.get)


def test_a_text_schema_and_its_text_reference_read_like_a_message_of_google_runtime():
    file = _load(ORDER, {"common/money.proto": MONEY})
    order = pt.message(file, "shop.Order")
    assert pt.spark_type(order).simpleString() == (
        "struct<id:string,total:struct<cents:bigint,currency:string>,counts:map<string,int>,"
        "status:string,placed:timestamp>")
    again = pt.message(pt.load_set(pt.file_set(file)), "shop.Order")  # what a read task gets
    Order = message_factory.GetMessageClass(again)
    msg = Order(id="o-1", counts={"a": 2}, status=1)
    msg.total.cents = 250
    payload = msg.SerializeToString()
    data = np.frombuffer(payload, np.uint8)
    array, errors = pp.decode(pp.compile_program(again), np.array([0]), np.array([len(payload)]), data)
    assert errors.tolist() == [0]
    value = array.to_pylist()[0]
    assert value["id"] == "o-1" and value["total"] == {"cents": 250, "currency": None}
    assert dict(value["counts"]) == {"a": 2} and value["status"] == "PAID" and value["placed"] is None


def test_a_reference_may_be_serialized():
    F = descriptor_pb2.FieldDescriptorProto
    money = descriptor_pb2.FileDescriptorProto(name="common/money.proto", package="shop.common",
                                               syntax="proto3")
    money.message_type.add(name="Money").field.add(name="cents", number=1, type=F.TYPE_INT64,
                                                   label=F.LABEL_OPTIONAL)
    file = _load(ORDER, {"common/money.proto": base64.b64encode(money.SerializeToString()).decode()})
    total = pt.spark_type(pt.message(file, "shop.Order"))["total"].dataType
    assert total.simpleString() == "struct<cents:bigint>"


def test_imports_are_read_without_comments():
    assert protobuf_text.imports(ORDER) == ["common/money.proto", "google/protobuf/timestamp.proto"]
    assert protobuf_text.imports('import public "a.proto";\nimport weak "b.proto";') == ["a.proto", "b.proto"]


@pytest.mark.parametrize(("text", "references", "reason"), [
    ('syntax = "proto3"; message A { int32 a = 1 }', {},
     r"does not compile: registered\.proto:1:\d+: Expected \";\""),
    (ORDER, {}, r"imports 'common/money\.proto', which is none of its references in the registry"),
    ('syntax = "proto3"; import "../../etc/x.proto"; message A { int32 a = 1; }',
     {"../../etc/x.proto": MONEY}, r"imports '\.\./\.\./etc/x\.proto', a path outside its folder"),
    ('syntax = "proto3"; message A { Missing m = 1; }', {},
     r"does not compile: .*\"Missing\" is not defined"),
])
def test_what_does_not_compile_is_refused_naming_why(text, references, reason):
    with pytest.raises(pt.ProtobufSchemaError, match=reason):
        _load(text, references)


def test_without_a_compiler_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "grpc_tools", None)  # import grpc_tools fails
    monkeypatch.setenv("PATH", "")
    with pytest.raises(pt.ProtobufSchemaError, match=r'pip install "jetspark\[protobuf-text\]"'):
        _load(ORDER, {"common/money.proto": MONEY})
