"""A record chooses its writer schema by id, so it can point at any schema a registry holds or
any answer it gives. Each writer id is decided once: an unusable one (recursive, too large a
program, malformed — from a registry that does not check what it stores —, refused with 403,
400, 422, 429, a body past the size bound) makes its records malformed rows whose
``valueError`` names the id and why, and the other records are read; only a registry that cannot
be reached, refuses the credentials (401) or fails (5xx) fails the task. The answers Apicurio
would not give come from an HTTP server the test starts; a recursive schema and a program bomb
are also registered in the real registry, and read through Kafka and Spark across a restart."""

from __future__ import annotations

import io
import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import fastavro
import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from jetspark.datasources.kafka.typed_values import TypedValues
from jetspark.options import Options
from jetspark.schemas.registry import MAX_BODY_BYTES, SchemaRegistryError
from tests.integration.scripts.jetkafka_common import produce_values, read_typed

pytestmark = pytest.mark.integration

READER = {"type": "record", "name": "Node", "namespace": "hostile", "fields": [{"name": "v", "type": "int"}]}
LINKED = {**READER, "fields": [*READER["fields"],
                               {"name": "next", "type": ["null", "Node"], "default": None}]}


def _bomb(levels: int = 18) -> dict:
    """A 2.5 KB schema whose program doubles per level: each level's record uses the previous twice."""
    inner: object = {"type": "record", "name": "L0", "fields": [{"name": "x", "type": "int"}]}
    for i in range(1, levels):
        inner = {"type": "record", "name": f"L{i}", "fields": [{"name": "p", "type": inner},
                                                               {"name": "q", "type": f"hostile.L{i - 1}"}]}
    return {**READER, "fields": [*READER["fields"], {"name": "big", "type": inner}]}


WRITERS = {  # id: (the registry's answer: status, body) and what valueError must say (| between choices)
    1: ((200, {"schema": json.dumps(READER)}), None),
    2: ((200, {"schema": json.dumps(LINKED)}), "contains itself"),
    3: ((200, {"schema": json.dumps(_bomb())}), "more than 100,000 nodes"),
    4: ((200, {"schema": json.dumps({**READER, "fields": [{"name": "e", "type": {"type": "enum"}}]})}),
        "KeyError"),
    5: ((200, {"schema": json.dumps({**READER, "fields": [
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": "abc"}}]})}), "'abc'"),
    6: ((200, {"schema": json.dumps({**READER, "fields": 5})}), "TypeError"),
    7: ((200, {"schema": json.dumps({**READER, "fields": [
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2**40}}]})}),
        "1099511627776|OverflowError"),
    8: ((200, {"schemaType": "AVRO"}), "with no schema"),
    9: ((200, {"schema": 5}), "with no schema"),
    403: ((403, {"error_code": 40301, "message": "not allowed"}), "HTTP 403"),
    400: ((400, {"error_code": 400, "message": "Failed to discover artifact type from content"}), "HTTP 400"),
    422: ((422, {"error_code": 42201, "message": "invalid"}), "HTTP 422"),
    429: ((429, {"error_code": 429, "message": "slow down"}), "HTTP 429"),
    404: ((404, {"error_code": 40403, "message": "Schema not found"}), "is not in the Schema Registry"),
    13: ((200, None), f"more than {MAX_BODY_BYTES >> 20} MiB"),
}
FAILING = {401: 401, 500: 500, 503: 503}
"""Ids whose answer fails the task: credentials refused, the registry failing."""


class _Registry(ThreadingHTTPServer):
    """A registry that answers as WRITERS and FAILING say, and counts the requests per path."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.asked: Counter[str] = Counter()
        self.routes: dict[str, tuple[int, dict]] = {}
        """Answers by path (path without ``?format=serialized``), before the Avro ones."""
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self.server.asked[self.path] += 1
        route = self.server.routes.get(self.path.split("?")[0])
        if route is not None:
            return self._answer(*route)
        if self.path.startswith("/subjects/"):
            return self._answer(200, {"id": 1, "version": 1, "subject": "s", "schema": json.dumps(READER)})
        schema_id = int(self.path.split("/")[3].split("?")[0])
        if schema_id in FAILING:
            return self._answer(FAILING[schema_id], {"error_code": FAILING[schema_id], "message": "no"})
        (status, body), _ = WRITERS[schema_id]
        if body is None:  # a body past the bound, sent without end
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            chunk = b" " * (1 << 20)
            try:
                for _ in range((MAX_BODY_BYTES >> 20) + 4):
                    self.wfile.write(chunk)
            except OSError:
                pass
            return None
        return self._answer(status, body)

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 429:
            self.send_header("Retry-After", "0")
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def registry():
    server = _Registry()
    yield server
    server.shutdown()
    server.server_close()


def _framed(schema_id: int, v: int) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(READER), {"v": v})
    return b"\x00" + schema_id.to_bytes(4, "big") + out.getvalue()


def _typed(url: str) -> TypedValues:
    typed = TypedValues.parse(Options({"schemaRegistry.url": url, "value.format": "avro",
                                       "schemaRegistry.timeout": "3s"}), ("t",))
    assert typed is not None
    return typed


def test_each_unusable_writer_id_makes_its_records_malformed_once_per_process(registry):
    ids = [1, *[i for i in WRITERS if i != 1], 1]
    values = pa.array([_framed(i, n) for n, i in enumerate(ids)], pa.binary())
    typed = _typed(registry.url)
    decoded, errors = typed.decode_values(values)
    assert decoded[0].as_py() == {"v": 0} and decoded[len(ids) - 1].as_py() == {"v": len(ids) - 1}
    for n, schema_id in enumerate(ids):
        why = WRITERS[schema_id][1]
        if why is None:
            assert errors[n].as_py() is None
        else:
            assert decoded[n].as_py() is None
            text = errors[n].as_py()
            assert f"schema id {schema_id}" in text and any(w in text for w in why.split("|")), text
    asked = dict(registry.asked)
    typed.decode_values(values)  # a replay: the lasting answers are kept, 429 is asked again
    again = {p: n - asked.get(p, 0) for p, n in registry.asked.items() if n != asked.get(p, 0)}
    assert again == {"/schemas/ids/429": asked["/schemas/ids/429"]}
    for schema_id in FAILING:  # credentials refused, the registry failing: the task fails
        with pytest.raises(SchemaRegistryError, match=rf"HTTP {schema_id}.*schemaRegistry"):
            typed.decode_values(pa.array([_framed(1, 0), _framed(schema_id, 1)], pa.binary()))


def test_each_writer_id_is_compiled_and_counted_once_per_process_not_per_record(registry, capfd):
    """The time deciding writer schemas takes (the registry's answer, compiling) is counted per
    new writer id, and each decision said on stderr with the id: a replay adds nothing."""
    from jetspark.datasources.kafka.writer_costs import writer_costs

    ids = [1, 1, 2, 1, 2, 2, 1]
    values = pa.array([_framed(i, n) for n, i in enumerate(ids)], pa.binary())
    typed = _typed(registry.url)
    before = writer_costs()
    capfd.readouterr()
    typed.decode_values(values)
    after = writer_costs()
    assert after.schemas == before.schemas + 2 and after.seconds > before.seconds
    said = [line for line in capfd.readouterr().err.splitlines() if "writer schema id" in line]
    assert len(said) == 2 and "value writer schema id 1 (avro): usable in " in said[0], said
    assert "value writer schema id 2 (avro): unusable in " in said[1], said
    assert f"{after.schemas} writer schemas in " in said[1], said
    typed.decode_values(values)  # a replay: both ids are decided already
    assert writer_costs() == after
    assert "writer schema id" not in capfd.readouterr().err


PROTO_READER = 'syntax = "proto3";\npackage hostile;\nmessage M { int32 v = 1; }\n'


def _proto_writer(imports: list[str], refs: list[tuple[str, str, int]]) -> dict:
    text = 'syntax = "proto3";\npackage hostile;\n' + "".join(f'import "{i}";\n' for i in imports)
    return {"schemaType": "PROTOBUF", "schema": text + "message M { int32 v = 1; }\n",
            "references": [{"name": n, "subject": s, "version": v} for n, s, v in refs]}


def test_each_unusable_protobuf_writer_makes_its_records_malformed(registry):
    """Files no compiler takes (a reference that is also a folder, NUL in an import, a lone
    surrogate, a reference whose version was deleted) are their ids' records' fault."""
    dep = {"id": 40, "version": 1, "schemaType": "PROTOBUF",
           "schema": 'syntax = "proto3";\npackage hostile;\nmessage D {}\n'}
    registry.routes.update({
        "/subjects/t-value/versions/latest": (200, {"id": 30, "version": 1, "schemaType": "PROTOBUF",
                                                    "schema": PROTO_READER}),
        "/schemas/ids/30": (200, {"schemaType": "PROTOBUF", "schema": PROTO_READER}),
        "/schemas/ids/31": (200, _proto_writer(["a.proto", "a.proto/b.proto"],
                                               [("a.proto", "a", 1), ("a.proto/b.proto", "b", 1)])),
        "/subjects/a/versions/1": (200, dep), "/subjects/b/versions/1": (200, dep),
        "/schemas/ids/32": (200, _proto_writer(["a\u0000.proto"], [("a\u0000.proto", "a", 1)])),
        "/schemas/ids/33": (200, _proto_writer(["\ud800.proto"], [("\ud800.proto", "a", 1)])),
        "/schemas/ids/34": (200, _proto_writer(["gone.proto"], [("gone.proto", "gone", 3)])),
        "/subjects/gone/versions/3": (404, {"error_code": 40402, "message": "Version not found"}),
    })
    typed = TypedValues.parse(Options({"schemaRegistry.url": registry.url, "value.format": "protobuf",
                                       "schemaRegistry.timeout": "3s"}), ("t",))
    ids = [30, 31, 32, 33, 34, 30]
    values = pa.array([b"\x00" + i.to_bytes(4, "big") + b"\x00\x08" + bytes([n + 1])  # indexes [0], v
                       for n, i in enumerate(ids)], pa.binary())
    decoded, errors = typed.decode_values(values)
    assert [d.as_py() for d in decoded] == [{"v": 1}, None, None, None, None, {"v": 6}]
    why = ["IsADirectoryError", "ValueError: embedded null byte", "UnicodeEncodeError", "HTTP 404"]
    for n, (schema_id, reason) in enumerate(zip(ids[1:-1], why, strict=True), 1):
        assert f"schema id {schema_id}" in errors[n].as_py() and reason in errors[n].as_py(), errors[n]


def test_a_serialized_protobuf_writer_whose_import_is_not_utf8_makes_its_records_malformed(registry):
    """A registry answers a Protobuf schema as a serialized FileDescriptorProto (base64), whose
    strings nothing checks: an import that is not UTF-8 comes out of it as bytes. That writer
    id's records are malformed, naming the id and the import; the task goes on."""
    import base64

    from google.protobuf import descriptor_pb2

    proto = descriptor_pb2.FileDescriptorProto(name="w.proto", package="hostile", syntax="proto3",
                                               dependency=["a.proto"])
    message = proto.message_type.add(name="M")
    message.field.add(name="v", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    serialized = proto.SerializeToString().replace(b"a.proto", b"\xff.proto")  # the same length
    registry.routes.update({
        "/subjects/t-value/versions/latest": (200, {"id": 30, "version": 1, "schemaType": "PROTOBUF",
                                                    "schema": PROTO_READER}),
        "/schemas/ids/30": (200, {"schemaType": "PROTOBUF", "schema": PROTO_READER}),
        "/schemas/ids/35": (200, {"schemaType": "PROTOBUF", "schema": base64.b64encode(serialized).decode(),
                                  "references": [{"name": "a.proto", "subject": "a", "version": 1}]}),
    })
    typed = TypedValues.parse(Options({"schemaRegistry.url": registry.url, "value.format": "protobuf",
                                       "schemaRegistry.timeout": "3s"}), ("t",))
    ids = [30, 35, 30, 35]
    values = pa.array([b"\x00" + i.to_bytes(4, "big") + b"\x00\x08" + bytes([n + 1])  # indexes [0], v
                       for n, i in enumerate(ids)], pa.binary())
    decoded, errors = typed.decode_values(values)
    assert [d.as_py() for d in decoded] == [{"v": 1}, None, {"v": 3}, None]
    assert errors[0].as_py() is None and errors[2].as_py() is None
    for n in (1, 3):
        text = errors[n].as_py()
        assert text.startswith("schema id 35: "), text
        assert "imports b'\\xff.proto', a name that is not UTF-8" in text, text
    assert registry.asked["/schemas/ids/35?format=serialized"] == 1  # decided once


def test_a_registry_that_never_finishes_an_answer_fails_within_the_timeout():
    """A body dripped byte by byte: the total deadline, not each read's, ends the request."""
    import socket
    import time

    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drip() -> None:
        conn, _ = listener.accept()
        conn.recv(4096)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
        while not stop.is_set():
            try:
                conn.sendall(b" ")
            except OSError:
                return
            stop.wait(0.2)
        conn.close()

    threading.Thread(target=drip, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    started = time.monotonic()
    try:
        with pytest.raises(SchemaRegistryError, match=r"schemaRegistry.timeout"):
            _typed(url)
    finally:
        stop.set()
        listener.close()
    assert time.monotonic() - started < 30  # the 3 s deadline, never the drip's 100,000 × 0.2 s


def test_a_topic_of_good_and_hostile_writers_delivers_every_good_record_across_a_restart(
        spark, kafka_bootstrap, kafka_topic, schema_registry_url, tmp_path):
    """The real registry holds the reader, a recursive writer and a program bomb (valid Avro,
    registered through confluent-kafka's client) and knows no id 999999."""
    topic = kafka_topic()
    theirs = SchemaRegistryClient({"url": schema_registry_url})
    reader_id = theirs.register_schema(f"{topic}-value", Schema(json.dumps(READER), "AVRO"))
    linked_id = theirs.register_schema(f"{topic}-linked", Schema(json.dumps(LINKED), "AVRO"))
    bomb_id = theirs.register_schema(f"{topic}-bomb", Schema(json.dumps(_bomb()), "AVRO"))
    produce_values(kafka_bootstrap, topic, [_framed(i, n) for n, i in enumerate(
        [reader_id, linked_id, reader_id, bomb_id, reader_id, 999_999, reader_id])])

    def run() -> list:  # a file sink: its log holds what was committed, a restart goes on from it
        stream = read_typed(spark, kafka_bootstrap, topic, schema_registry_url, "avro", stream=True)
        query = (stream.select("offset", "value.v", "valueError").writeStream
                 .format("parquet").option("path", str(tmp_path / "out"))
                 .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
        query.awaitTermination()
        return spark.read.parquet(str(tmp_path / "out")).orderBy("offset").collect()

    first = run()
    assert [r.v for r in first] == [0, None, 2, None, 4, None, 6]
    assert "contains itself" in first[1].valueError and f"schema id {linked_id}" in first[1].valueError
    assert "more than 100,000 nodes" in first[3].valueError
    assert first[5].valueError == "schema id 999999 is not in the Schema Registry"
    produce_values(kafka_bootstrap, topic, [_framed(i, n) for n, i in [(7, reader_id), (8, linked_id),
                                                                       (9, reader_id)]])
    second = run()[len(first):]  # the restart on the checkpoint: the new records once, the same decisions
    assert [(r.v, r.valueError is None) for r in second] == [(7, True), (None, False), (9, True)]
