"""jetspark's Schema Registry client over TLS with authentication, against the real registry.

Apicurio Registry authenticates through an OpenID Connect server (Keycloak) only, which this
suite does not run; so the test puts an HTTPS server of its own in front of the real registry:
it presents a certificate from a CA the test makes (trustme), asks the client for a certificate
from that CA, requires HTTP basic authentication, and forwards each request to the registry.
The client verifies the server in full (the CA and the host name, ``schemaRegistry.ssl.*``);
a server from another CA, a certificate for another host, a missing client certificate and a
wrong password are refused, each with an error that names the option and never the password.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import trustme
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from jetspark.options import Options
from jetspark.schemas.registry import RegistryClient, RegistrySettings, SchemaRegistryError

pytestmark = pytest.mark.integration

USER, PASSWORD = "reader", "s3cr3t-registry-pw"
V1 = {"type": "record", "name": "Reading", "namespace": "jetspark.test",
      "fields": [{"name": "sensor", "type": "string"}]}


class _Gate(ThreadingHTTPServer):
    daemon_threads = True
    upstream: urllib.parse.SplitResult
    authorization: str


class _Forward(BaseHTTPRequestHandler):
    """Basic authentication required, then the request forwarded to the registry as it came."""

    server: _Gate

    def _forward(self) -> None:
        if self.headers.get("Authorization") != self.server.authorization:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="registry"')
            self.send_header("Content-Type", "application/json")
            body = json.dumps({"error_code": 40101, "message": "Unauthorized"}).encode()
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else None
        up = self.server.upstream
        conn = http.client.HTTPConnection(up.hostname, up.port, timeout=120)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept")}
            if up.username is not None:  # the registry's own user (the local one has a password)
                pair = f"{urllib.parse.unquote(up.username)}:{urllib.parse.unquote(up.password or '')}"
                headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
            conn.request(self.command, up.path.rstrip("/") + self.path, body=data, headers=headers)
            answer = conn.getresponse()
            body = answer.read()
        finally:
            conn.close()
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.getheader("Content-Type") or "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _forward

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def tls(tmp_path_factory) -> dict[str, Path]:
    """A CA, the gate's certificate for 127.0.0.1 (and one for another host), a client
    certificate, and a CA that signed none of them: PEM files."""
    folder = tmp_path_factory.mktemp("registry-tls")
    ca, other_ca = trustme.CA(), trustme.CA()
    files = {"ca": folder / "ca.pem", "other_ca": folder / "other-ca.pem", "client": folder / "client.pem",
             "client_key": folder / "client-key.pem"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    other_ca.cert_pem.write_to_path(str(files["other_ca"]))
    client = ca.issue_cert("jetspark-client")
    client.cert_chain_pems[0].write_to_path(str(files["client"]))
    client.private_key_pem.write_to_path(str(files["client_key"]))
    return {**files, "_ca": ca}  # type: ignore[dict-item]


def _serve(tls: dict, registry_url: str, host: str) -> Iterator[str]:
    gate = _Gate(("127.0.0.1", 0), _Forward)
    gate.upstream = urllib.parse.urlsplit(registry_url)
    gate.authorization = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.verify_mode = ssl.CERT_REQUIRED  # a client certificate from the test's CA
    context.load_verify_locations(cafile=str(tls["ca"]))
    tls["_ca"].issue_cert(host).configure_cert(context)
    gate.socket = context.wrap_socket(gate.socket, server_side=True)
    thread = threading.Thread(target=gate.serve_forever, daemon=True, name="registry-gate")
    thread.start()
    try:
        yield f"https://127.0.0.1:{gate.server_address[1]}"
    finally:
        gate.shutdown()
        gate.server_close()


@pytest.fixture(scope="module")
def gate(tls, schema_registry_url) -> Iterator[str]:
    """The HTTPS URL of the gate in front of the registry (its certificate names 127.0.0.1)."""
    yield from _serve(tls, schema_registry_url, "127.0.0.1")


@pytest.fixture(scope="module")
def misnamed_gate(tls, schema_registry_url) -> Iterator[str]:
    """The same gate with a certificate from the right CA for another host name."""
    yield from _serve(tls, schema_registry_url, "registry.example.com")


@pytest.fixture
def registered(schema_registry_url) -> int:
    """A schema of its own for each test (the client keeps a schema it read by URL and id)."""
    theirs = SchemaRegistryClient({"url": schema_registry_url})
    suffix = uuid.uuid4().hex[:8]
    schema = {**V1, "namespace": f"jetspark.test.tls{suffix}"}
    return theirs.register_schema(f"tls_{suffix}-value", Schema(json.dumps(schema), "AVRO"))


def _client(url: str, tls: dict, *, ca: str = "ca", client_cert: bool = True,
            user_info: str = f"{USER}:{PASSWORD}") -> RegistryClient:
    options = {"schemaRegistry.url": url, "schemaRegistry.ssl.ca.location": str(tls[ca]),
               "schemaRegistry.basic.auth.user.info": user_info, "schemaRegistry.timeout": "2 minutes"}
    if client_cert:
        options |= {"schemaRegistry.ssl.certificate.location": str(tls["client"]),
                    "schemaRegistry.ssl.key.location": str(tls["client_key"])}
    settings = RegistrySettings.parse(Options(options))
    assert settings is not None
    return RegistryClient(settings)


def _refused(client: RegistryClient, schema_id: int) -> str:
    with pytest.raises(SchemaRegistryError) as caught:
        client.schema(schema_id)
    text = str(caught.value)
    assert PASSWORD not in text and PASSWORD not in repr(client)
    return text


def test_verify_full_with_a_client_certificate_and_basic_auth_reads_the_schema(gate, tls, registered):
    got = _client(gate, tls).schema(registered)
    assert got.schema_id == registered and json.loads(got.text)["fields"] == V1["fields"]


def test_a_server_of_another_ca_is_refused(gate, tls, registered):
    text = _refused(_client(gate, tls, ca="other_ca"), registered)
    assert "CERTIFICATE_VERIFY_FAILED" in text and "schemaRegistry.url" in text, text


def test_a_certificate_for_another_host_is_refused(misnamed_gate, tls, registered):
    text = _refused(_client(misnamed_gate, tls), registered)
    assert "CERTIFICATE_VERIFY_FAILED" in text and "127.0.0.1" in text, text


def test_without_a_client_certificate_the_server_refuses(gate, tls, registered):
    text = _refused(_client(gate, tls, client_cert=False), registered)
    assert "schemaRegistry.url" in text, text


def test_a_wrong_password_is_refused_naming_the_options(gate, tls, registered):
    text = _refused(_client(gate, tls, user_info=f"{USER}:not-{PASSWORD}"), registered)
    assert "HTTP 401" in text and "schemaRegistry.basic.auth.user.info" in text, text
    assert f"not-{PASSWORD}" not in text
