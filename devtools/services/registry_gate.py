"""The local Schema Registry's door: HTTP basic authentication in front of Apicurio Registry.

Apicurio Registry 3.0.x authenticates only through an OpenID Connect server. So the local one
listens on a Unix domain socket in a 0700 folder of its data (no TCP port: no other local user
can reach it), and this gate listens on the registry's TCP port of 127.0.0.1: a request with
user ``jetspark`` and the password of ``registry-password`` (0600, beside the data) is forwarded
to the socket as it came; any other is answered 401. Run as
``python -m jetspark.devtools.services.registry_gate PORT SOCKET PASSWORD_FILE``.
"""

from __future__ import annotations

import base64
import hmac
import http.client
import json
import os
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

USER = "jetspark"
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
               "transfer-encoding", "upgrade", "authorization", "host", "content-length", "forwarded",
               "x-forwarded-for", "x-forwarded-host", "x-forwarded-port", "x-forwarded-proto"}
_TIMEOUT_S = 120.0


class _UnixConnection(http.client.HTTPConnection):
    """HTTP to a Unix domain socket."""

    def __init__(self, path: str, timeout_s: float) -> None:
        super().__init__("localhost", timeout=timeout_s)
        self.socket_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socket_path)


def unix_connection(path: str, timeout_s: float = _TIMEOUT_S) -> http.client.HTTPConnection:
    """An HTTP connection to the server's socket at ``path``."""
    return _UnixConnection(path, timeout_s)


class Gate(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, upstream: str, password: str) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.upstream = upstream
        self.expected = ("Basic " + base64.b64encode(f"{USER}:{password}".encode()).decode()).encode()


class _Handler(BaseHTTPRequestHandler):
    server: Gate
    protocol_version = "HTTP/1.1"

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else None
        given = (self.headers.get("Authorization") or "").encode()
        if not hmac.compare_digest(given, self.server.expected):
            return self._answer(401, {"Content-Type": "application/json",
                                      "WWW-Authenticate": 'Basic realm="jetspark schema registry"'},
                                b'{"error_code":40101,"message":"Unauthorized"}')
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        # Apicurio asks for the client's address; a socket peer has none, so it is given here.
        headers["X-Forwarded-For"] = f"{self.client_address[0]}:{self.client_address[1]}"
        conn = unix_connection(self.server.upstream)
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            answer = conn.getresponse()
            data = answer.read()
            kept = {k: v for k, v in answer.getheaders() if k.lower() not in _HOP_BY_HOP}
        except OSError as e:
            why = json.dumps({"error_code": 50201, "message": f"the registry does not answer: {e}"})
            return self._answer(502, {"Content-Type": "application/json"}, why.encode())
        finally:
            conn.close()
        self._answer(answer.status, kept, data)

    def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _forward

    def log_message(self, *args) -> None:
        pass


def main(argv: list[str]) -> None:
    port, upstream, password_file = int(argv[0]), argv[1], argv[2]
    with os.fdopen(os.open(password_file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), encoding="utf-8") as f:
        password = f.read().strip()
    Gate(port, upstream, password).serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
