"""The native decoders refuse a hostile record at a cost in proportion to its bytes: an Avro
item count is checked against the bytes left for every kind of item (items that take no bytes,
as ``array<null>``, against a spare allowance per byte); a ``fixed`` size outside (0, 1 MiB] is
refused when the program is built; a record whose columns would grow past 64 MiB (a million
empty Protobuf sub-messages of a 50-field message) is a malformed row, not hundreds of MiB.

The cases that hung or took seconds of CPU a record before run in a child process under a
generous CPU limit (RLIMIT_CPU), so a regression fails the test instead of stalling the suite."""

from __future__ import annotations

import ast
import base64
import resource
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2

from jetspark.schemas import protobuf_program as pp
from jetspark.schemas import protobuf_types as pt
from jetspark.schemas.avro_program import ERRORS, compile_program, decode_values
from jetspark.schemas.avro_types import MAX_FIXED_SIZE, AvroSchemaError, spark_type

F = descriptor_pb2.FieldDescriptorProto
CPU_SECONDS = 60  # what each child may spend: the work it does takes well under a second


def _run_limited(code: str) -> str:
    """``code`` run in a child Python under RLIMIT_CPU; its stdout (the test fails on a crash
    or on the limit: SIGXCPU)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))

    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          preexec_fn=limit, check=False)
    assert done.returncode == 0, f"child ended with {done.returncode}: {done.stderr[-2000:]}"
    return done.stdout


def _zigzag(n: int) -> bytes:
    v = (n << 1) ^ (n >> 63)
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


NULLS = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"},
    {"name": "nothing", "type": {"type": "array", "items": "null"}},
    {"name": "empties", "type": {"type": "array", "items": {"type": "record", "name": "E", "fields": [
        {"name": "n", "type": "null"}]}}}]}


def _hostile_nulls() -> list[bytes]:
    """15-17-byte records claiming 2**31 or more items that take no bytes."""
    big = (1 << 62, (1 << 62) + 12345, (1 << 31) + 1)
    out = []
    for count in big:
        out.append(_zigzag(7) + _zigzag(count) + b"\x00" + b"\x00")  # array<null>
        out.append(_zigzag(7) + b"\x00" + _zigzag(count) + b"\x00")  # array<record of null>
        out.append(_zigzag(7) + _zigzag(-count) + _zigzag(0) + b"\x00" + b"\x00")  # a sized block
    return out


def test_an_array_of_items_that_take_no_bytes_is_refused_in_time_in_proportion_to_its_bytes():
    hostile = _hostile_nulls()
    assert all(len(h) <= 17 for h in hostile)
    good = _zigzag(7) + _zigzag(3) + b"\x00" + _zigzag(2) + b"\x00"
    reader = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}
    out = _run_limited(f"""
        import pyarrow as pa
        from jetspark.schemas.avro_program import compile_program, decode_values
        writer = {NULLS!r}
        column = pa.array([{good!r}] + {hostile!r} * 10 + [{good!r}], pa.binary())
        for reader in ({reader!r}, writer):  # skipped as fields the reader lacks, and stored
            array, errors = decode_values(compile_program(writer, reader), column)
            rows = array.to_pylist()
            print(repr((errors.tolist(), rows[0], rows[-1], rows[1:-1] == [None] * (len(rows) - 2))))
    """)
    n = len(hostile) * 10
    skipped, stored = (ast.literal_eval(line) for line in out.splitlines())
    assert skipped == ([0] + [5] * n + [0], {"id": 7}, {"id": 7}, True)
    row = {"id": 7, "nothing": [None] * 3, "empties": [{"n": None}] * 2}
    assert stored == ([0] + [5] * n + [0], row, row, True)
    assert ERRORS[5] == "a length or item count out of range"


def test_items_that_take_no_bytes_are_read_up_to_the_spare_allowance():
    writer = {"type": "record", "name": "R", "fields": [
        {"name": "nothing", "type": {"type": "array", "items": "null"}}]}
    fits = _zigzag(128) + b"\x00"  # 3 bytes: 64 per byte plus 64
    over = _zigzag(257) + b"\x00"
    array, errors = decode_values(compile_program(writer), pa.array([fits, over], pa.binary()))
    assert errors.tolist() == [0, 5]
    assert array.to_pylist() == [{"nothing": [None] * 128}, None]


def test_every_item_count_is_checked_against_the_bytes_left():
    """One item of each kind takes at least so many bytes: more items than that is refused at once."""
    kinds = [("boolean", 1), ("int", 1), ("float", 4), ("double", 8), ("string", 1),
             ({"type": "fixed", "name": "F", "size": 5}, 5),
             ({"type": "record", "name": "P", "fields": [{"name": "a", "type": "double"},
                                                          {"name": "b", "type": "null"}]}, 8),
             ({"type": "map", "values": "null"}, 1), (["null", "int"], 1)]
    for items, width in kinds:
        schema = {"type": "record", "name": "R", "fields": [
            {"name": "xs", "type": {"type": "array", "items": items}}]}
        body = b"\x01" * (3 * width)
        fits, over = _zigzag(3) + body, _zigzag(4) + body
        _, errors = decode_values(compile_program(schema), pa.array([fits, over], pa.binary()))
        assert errors.tolist()[1] == 5, items


@pytest.mark.parametrize("size", [-1, 0, -(2 ** 31), MAX_FIXED_SIZE + 1, 2 ** 40, "16", 1.5, True])
def test_a_fixed_size_outside_0_to_1_mib_is_refused_naming_the_type_and_the_range(size):
    fixed = {"type": "fixed", "name": "Blob", "size": size}
    schema = {"type": "record", "name": "R", "fields": [{"name": "b", "type": fixed}]}
    for writer, reader in [(schema, None), (schema, {"type": "record", "name": "R", "fields": []})]:
        with pytest.raises(AvroSchemaError, match=r"fixed type 'Blob' has size .*\(0, 1048576\] \(1 MiB\)"):
            compile_program(writer, reader)
    with pytest.raises(AvroSchemaError, match="'Blob'"):
        spark_type(schema)


def test_a_fixed_of_1_mib_is_read():
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "b", "type": {"type": "fixed", "name": "Blob", "size": MAX_FIXED_SIZE}}]}
    array, errors = decode_values(compile_program(schema), pa.array([b"\x07" * MAX_FIXED_SIZE], pa.binary()))
    assert errors.tolist() == [0] and array.to_pylist()[0]["b"] == b"\x07" * MAX_FIXED_SIZE


def test_a_program_with_a_fixed_size_out_of_range_is_refused_by_the_decoder_itself():
    """The decoder does not trust the program: a negative fixed size made its buffer's capacity
    double to 0 and loop for ever with the GIL released."""
    out = _run_limited("""
        import numpy as np
        from jetspark.schemas import _avro_arrow
        K_FIXED, K_RECORD = 7, 9
        starts = np.array([0], np.int64)
        for size in (-8, 0, (1 << 20) + 1):
            words = np.array([K_RECORD, 0, 1, 0, 1, K_FIXED, 0, 1, size, 0], np.int32).tobytes()
            try:
                _avro_arrow.decode(words, starts, starts, np.zeros(0, np.uint8))
            except ValueError as e:
                print(e)
    """)
    assert out.splitlines() == ["malformed Avro decoding program"] * 3


def test_an_avro_record_whose_columns_would_pass_64_mib_is_refused():
    """A one-byte null branch of a 1 MiB fixed stands for 1 MiB of column: 100 of them pass the
    record's budget, as 2 bytes of an empty repeated element do in Protobuf."""
    schema = {"type": "record", "name": "R", "fields": [{"name": "xs", "type": {"type": "array", "items": [
        "null", {"type": "fixed", "name": "Blob", "size": MAX_FIXED_SIZE}]}}]}
    few, many = _zigzag(60) + b"\x00" * 61, _zigzag(100) + b"\x00" * 101
    array, errors = decode_values(compile_program(schema), pa.array([few, many, few], pa.binary()))
    assert errors.tolist() == [0, 7, 0]
    assert ERRORS[7] == "the record decodes to more than 64 MiB of columns"
    assert array.to_pylist()[1] is None and array.to_pylist()[2] == {"xs": [None] * 60}


def _wide_repeated() -> pp.Program:
    """Outer { repeated Inner items = 1; } with Inner of 50 int64 fields."""
    fdp = descriptor_pb2.FileDescriptorProto(name="wide.proto", package="w", syntax="proto3")
    inner = fdp.message_type.add(name="Inner")
    for i in range(1, 51):
        inner.field.add(name=f"f{i}", number=i, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    outer = fdp.message_type.add(name="Outer")
    outer.field.add(name="items", number=1, type=F.TYPE_MESSAGE, type_name=".w.Inner", label=F.LABEL_REPEATED)
    text = base64.b64encode(fdp.SerializeToString()).decode()
    return pp.compile_program(pt.message(pt.load_file(text, lambda _n: None), "w.Outer"))


def test_a_megabyte_of_empty_protobuf_sub_messages_is_a_malformed_row_not_200_mib_of_columns():
    program = _wide_repeated()
    bomb = b"\x0a\x00" * 500_000  # 1 MB: half a million empty Inner messages
    fine = b"\x0a\x00" * 1000
    payloads = [fine, bomb, fine]
    data = np.frombuffer(b"".join(payloads), np.uint8)
    lengths = np.array([len(p) for p in payloads], np.int64)
    ends = np.cumsum(lengths)
    array, errors = pp.decode(program, ends - lengths, ends, data)
    assert errors.tolist() == [0, 9, 0]
    assert "64 MiB" in pp.ERRORS[9]
    rows = array.to_pylist()
    assert rows[1] is None and len(rows[0]["items"]) == len(rows[2]["items"]) == 1000
    assert array.nbytes < 4 * 2 ** 20  # the refused record left nothing behind
