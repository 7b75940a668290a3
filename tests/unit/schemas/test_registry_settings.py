"""The registry's settings, parsed once, and what the client sends and accepts, against small
local HTTP servers: credentials in headers and never in a repr or an error, never sent to
another origin; the next URL asked when one is busy; schemas kept per id."""

from __future__ import annotations

import base64
import http.server
import json
import threading
from typing import ClassVar

import pytest

from jetspark.errors import OptionError
from jetspark.options import Options
from jetspark.schemas.registry import RegistryClient, RegistrySettings, SchemaRegistryError


def _settings(**raw: str) -> RegistrySettings:
    settings = RegistrySettings.parse(Options(raw))
    assert settings is not None
    return settings


def _client(url: str, **raw: str) -> RegistryClient:
    return RegistryClient(_settings(**{"schemaRegistry.url": url, **raw}))


def test_no_url_no_settings_and_malformed_ones_name_the_option():
    assert RegistrySettings.parse(Options({})) is None
    for url in ("localhost:8081", ",", "ftp://r"):
        with pytest.raises(OptionError, match=r"schemaRegistry\.url"):
            _settings(**{"schemaRegistry.url": url})
    with pytest.raises(OptionError, match=r"schemaRegistry\.basic\.auth\.user\.info") as caught:
        _settings(**{"schemaRegistry.url": "http://r", "schemaRegistry.basic.auth.user.info": "nocolon"})
    assert "nocolon" not in str(caught.value)
    with pytest.raises(OptionError, match=r"schemaRegistry\.timeout.*bare number is refused"):
        _settings(**{"schemaRegistry.url": "http://r", "schemaRegistry.timeout": "10"})
    ten = _settings(**{"schemaRegistry.url": "http://r", "schemaRegistry.timeout": "10 seconds"})
    assert ten.timeout_s == 10


def test_two_ways_to_authenticate_are_refused_without_showing_either():
    cases = [
        {"schemaRegistry.url": "http://u:pw-a@r", "schemaRegistry.basic.auth.user.info": "v:pw-b"},
        {"schemaRegistry.url": "http://r", "schemaRegistry.basic.auth.user.info": "v:pw-b",
         "schemaRegistry.bearer.auth.token": "tok-c"},
    ]
    for raw in cases:
        with pytest.raises(OptionError, match="one way to authenticate only") as caught:
            _settings(**raw)
        assert not any(secret in str(caught.value) for secret in ("pw-a", "pw-b", "tok-c"))


def test_repr_shows_no_credential():
    settings = _settings(**{"schemaRegistry.url": "http://u:pw-in-url@r:8081,http://s:8081"})
    assert settings.urls == ("http://u:pw-in-url@r:8081", "http://s:8081")
    token = _settings(**{"schemaRegistry.url": "http://r", "schemaRegistry.bearer.auth.token": "tok-secret"})
    for shown in (repr(settings), repr(RegistryClient(settings)), repr(token)):
        assert "pw-in-url" not in shown and "tok-secret" not in shown


class _Registry(http.server.BaseHTTPRequestHandler):
    """Answers ``/schemas/ids/<id>`` with a schema naming the port; ``busy`` ports answer 503,
    ``/redirect`` sends elsewhere, ``/html`` is no JSON."""

    seen: ClassVar[list[tuple[int, str, dict]]] = []
    busy: ClassVar[set[int]] = set()
    elsewhere: ClassVar[str] = ""

    def do_GET(self) -> None:
        port = self.server.server_address[1]
        type(self).seen.append((port, self.path, dict(self.headers)))
        if port in self.busy:
            return self._answer(503, {"error_code": 50003, "message": "busy"})
        if self.path.startswith("/schemas/ids/"):
            return self._answer(200, {"schema": json.dumps(f"from {port}")})
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", self.elsewhere + "/schemas/ids/1")
            self.end_headers()
            return None
        if self.path == "/html":
            return self._answer(200, None, b"<html>proxy login</html>")
        return self._answer(404, {"error_code": 40403, "message": "Schema not found"})

    def _answer(self, status: int, body: dict | None, raw: bytes | None = None) -> None:
        data = raw if raw is not None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def servers():
    started = []
    for _ in range(2):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
    _Registry.seen, _Registry.busy = [], set()
    yield [f"http://127.0.0.1:{s.server_address[1]}" for s in started]
    for server in started:
        server.shutdown()


def _auth(headers: dict) -> str:
    kind, _, value = headers["Authorization"].partition(" ")
    return f"{kind} {base64.b64decode(value).decode()}" if kind == "Basic" else f"{kind} {value}"


def test_each_way_to_authenticate_sends_its_header(servers):
    one, two = servers
    host = two.removeprefix("http://")
    _client(one, **{"schemaRegistry.basic.auth.user.info": "alice:pw1"}).schema(7)
    _client(f"http://bob:pw2@{host}").schema(7)
    _client(one, **{"schemaRegistry.bearer.auth.token": "tok3"}).schema(8)
    assert [_auth(h) for _, _, h in _Registry.seen] == ["Basic alice:pw1", "Basic bob:pw2", "Bearer tok3"]
    assert all(h["Accept"] == "application/vnd.schemaregistry.v1+json" for _, _, h in _Registry.seen)


def test_schemas_are_kept_per_registry_and_id(servers):
    client = _client(servers[0])
    first = client.schema(11)
    assert _client(servers[0]).schema(11) is first  # another client of the same registry: no request
    assert len(_Registry.seen) == 1


def test_a_busy_url_passes_the_request_to_the_next(servers):
    one, two = servers
    _Registry.busy = {int(one.rsplit(":", 1)[1])}
    assert json.loads(_client(f"{one},{two}").schema(12).text) == f"from {two.rsplit(':', 1)[1]}"
    _Registry.busy = {int(u.rsplit(":", 1)[1]) for u in servers}
    with pytest.raises(SchemaRegistryError, match=r"cannot reach the Schema Registry.*HTTP 503.*HTTP 503"):
        _client(f"{one},{two}").schema(13)


def test_a_refusal_carries_the_registrys_code_and_message(servers):
    with pytest.raises(SchemaRegistryError, match=r"HTTP 404 \(error 40403\): Schema not found") as caught:
        _client(servers[0]).version("s", 3)
    assert (caught.value.status, caught.value.error_code) == (404, 40403)


def test_a_redirect_to_another_origin_gets_no_credentials(servers):
    one, two = servers
    _Registry.elsewhere = two
    client = _client(one, **{"schemaRegistry.basic.auth.user.info": "alice:s3cret"})
    with pytest.raises(SchemaRegistryError, match=r"redirect to .* another scheme, host or port") as caught:
        client._get("/redirect")
    assert "s3cret" not in str(caught.value)
    assert [port for port, _, _ in _Registry.seen] == [int(one.rsplit(":", 1)[1])]  # nothing reached two


def test_an_answer_that_is_no_json_says_so(servers):
    with pytest.raises(SchemaRegistryError, match=r"not JSON .*schemaRegistry\.url"):
        _client(servers[0])._get("/html")
