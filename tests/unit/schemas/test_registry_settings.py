"""The registry's settings, parsed once, and what the client sends: credentials in headers,
never in a repr or an error."""

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


def test_no_url_no_settings_and_malformed_ones_name_the_option():
    assert RegistrySettings.parse(Options({})) is None
    with pytest.raises(OptionError, match=r"schemaRegistry\.url"):
        _settings(**{"schemaRegistry.url": "localhost:8081"})
    with pytest.raises(OptionError, match=r"schemaRegistry\.basic\.auth\.user\.info") as caught:
        _settings(**{"schemaRegistry.url": "http://r", "schemaRegistry.basic.auth.user.info": "nocolon"})
    assert "nocolon" not in str(caught.value)
    with pytest.raises(OptionError, match=r"schemaRegistry\.timeout"):
        _settings(**{"schemaRegistry.url": "http://r", "schemaRegistry.timeout": "soon"})


def test_repr_shows_no_credential():
    settings = _settings(**{"schemaRegistry.url": "http://u:pw-in-url@r:8081,http://s:8081",
                            "schemaRegistry.basic.auth.user.info": "user:pw-in-option"})
    assert settings.urls == ("http://u:pw-in-url@r:8081", "http://s:8081")
    assert "pw-in" not in repr(settings) and "pw-in" not in repr(RegistryClient(settings))


class _Registry(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[dict]] = []

    def do_GET(self) -> None:
        type(self).seen.append(dict(self.headers))
        if self.path == "/schemas/ids/7":
            body, status = {"schema": '"string"'}, 200
        else:
            body, status = {"error_code": 40403, "message": "Schema not found"}, 404
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def registry():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Registry.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_basic_auth_from_the_option_and_from_the_url(registry):
    host = registry.removeprefix("http://")
    RegistryClient(_settings(**{"schemaRegistry.url": registry,
                                "schemaRegistry.basic.auth.user.info": "alice:pw1"})).schema(7)
    RegistryClient(_settings(**{"schemaRegistry.url": f"http://bob:pw2@{host}"})).schema(7)
    auths = [base64.b64decode(h["Authorization"].split()[1]).decode() for h in _Registry.seen]
    assert auths == ["alice:pw1", "bob:pw2"]
    assert all(h["Accept"] == "application/vnd.schemaregistry.v1+json" for h in _Registry.seen)


def test_a_refusal_carries_the_registrys_code_and_message(registry):
    with pytest.raises(SchemaRegistryError, match=r"HTTP 404 \(error 40403\): Schema not found") as caught:
        RegistryClient(_settings(**{"schemaRegistry.url": registry})).schema(8)
    assert (caught.value.status, caught.value.error_code) == (404, 40403)
