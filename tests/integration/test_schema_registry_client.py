"""jetspark's Schema Registry client against a real registry (Apicurio Registry's
Confluent-compatible API): schemas registered by confluent-kafka's own client are read back by
id and by subject; the registry's refusals and an unreachable registry give errors that name
what was asked and the option, never a credential."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from jetspark.devtools.services.process import free_port
from jetspark.options import Options
from jetspark.schemas.registry import RegistryClient, RegistrySettings, SchemaRegistryError

pytestmark = pytest.mark.integration

V1 = {"type": "record", "name": "Reading", "namespace": "jetspark.test",
      "fields": [{"name": "sensor", "type": "string"}, {"name": "value", "type": "double"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "unit", "type": "string", "default": "C"}]}


def _client(url: str, **extra: str) -> RegistryClient:
    settings = RegistrySettings.parse(Options({"schemaRegistry.url": url, **extra}))
    assert settings is not None
    return RegistryClient(settings)


def test_schemas_by_id_and_by_subject(schema_registry_url):
    theirs = SchemaRegistryClient({"url": schema_registry_url})
    subject = f"readings_{uuid.uuid4().hex[:8]}-value"
    id1 = theirs.register_schema(subject, Schema(json.dumps(V1), "AVRO"))
    id2 = theirs.register_schema(subject, Schema(json.dumps(V2), "AVRO"))
    ours = _client(schema_registry_url)

    first = ours.schema(id1)
    assert (first.schema_id, first.schema_type, json.loads(first.text)) == (id1, "AVRO", V1)
    assert ours.schema(id1) is first  # kept for the process: asked once per id
    latest = ours.version(subject)
    assert (latest.schema_id, latest.version, latest.subject) == (id2, 2, subject)
    assert json.loads(latest.text) == V2
    assert ours.version(subject, 1).schema_id == id1
    assert ours.lookup(subject, "AVRO", json.dumps(V1)).version == 1
    assert ours.register(subject, "AVRO", json.dumps(V2)) == id2  # already there: its id


def test_an_unknown_subject_names_the_request_and_the_registrys_answer(schema_registry_url):
    with pytest.raises(SchemaRegistryError, match=r"GET /subjects/nope_[0-9a-f]+-value/versions/latest "
                                                  r"with HTTP 404") as caught:
        _client(schema_registry_url).version(f"nope_{uuid.uuid4().hex[:8]}-value")
    assert caught.value.status == 404


def test_an_unreachable_registry_names_the_options_and_never_the_password():
    url = f"http://reader:s3cr3t-pw@127.0.0.1:{free_port()}"
    client = _client(url, **{"schemaRegistry.timeout": "2 seconds"})
    with pytest.raises(SchemaRegistryError) as caught:
        client.schema(1)
    text = str(caught.value)
    assert "cannot reach the Schema Registry (schemaRegistry.url)" in text
    assert "schemaRegistry.timeout" in text and "s3cr3t" not in text
    assert "s3cr3t" not in repr(client)


def test_what_one_credential_was_given_is_never_another_credentials_answer():
    """Schemas are kept for the process per registry settings, credentials included: a client
    with a wrong password (or none) is asked by the registry, and refused, even for an id a
    client with the right one has read (a shared process, such as a Spark Connect server, serves
    several users)."""
    import base64
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    good = "Basic " + base64.b64encode(b"reader:right-password").decode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = ((200, {"schema": json.dumps(V1)}) if self.headers.get("Authorization") == good
                            else (401, {"error_code": 40101, "message": "Unauthorized"}))
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert json.loads(_client(url, **{"schemaRegistry.basic.auth.user.info": "reader:right-password"})
                          .schema(7).text) == V1
        for extra in ({"schemaRegistry.basic.auth.user.info": "reader:wrong-password"}, {}):
            with pytest.raises(SchemaRegistryError, match="HTTP 401") as refused:
                _client(url, **extra).schema(7)
            assert "wrong-password" not in str(refused.value) and "right-password" not in str(refused.value)
    finally:
        server.shutdown()
        server.server_close()
