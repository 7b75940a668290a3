"""``jetspark inspect --rabbitmq-api``: the Basic credentials go to the API's own origin only,
never to the host (scheme, port) a redirect names. Two real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from jetspark.errors import ServiceError
from jetspark.inspect.services import management_queue

CANARY = "c4n4ry-api-s3cret"


class _Server:
    """Records each request's path and Authorization header; answers by ``routes`` (path →
    (status, Location or JSON body))."""

    def __init__(self, routes: dict[str, tuple[int, str]]) -> None:
        self.seen: list[tuple[str, str | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.seen.append((self.path, self.headers.get("Authorization")))
                status, payload = routes.get(self.path.split("?")[0], (404, "{}"))
                self.send_response(status)
                if 300 <= status < 400:
                    self.send_header("Location", payload)
                    payload = ""
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload.encode())

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers() -> Iterator[list[_Server]]:
    made: list[_Server] = []
    yield made
    for s in made:
        s.close()


QUEUE_PATH = "/api/queues/%2F/orders"


def test_a_redirect_to_another_port_gets_no_credentials(servers):
    elsewhere = _Server({QUEUE_PATH: (200, json.dumps({"messages_unacknowledged": 1}))})
    api = _Server({QUEUE_PATH: (302, elsewhere.url + QUEUE_PATH)})
    servers += [elsewhere, api]
    with pytest.raises(ServiceError) as err:
        management_queue(f"http://admin:{CANARY}@127.0.0.1:{api.url.rsplit(':', 1)[1]}", "/", "orders",
                         timeout_s=10)
    assert "redirect" in str(err.value) and CANARY not in str(err.value)
    assert [path for path, _ in api.seen] == [QUEUE_PATH] and api.seen[0][1].startswith("Basic ")
    assert elsewhere.seen == []  # never asked, so never given the Basic credentials


def test_a_redirect_within_the_api_is_followed(servers):
    api = _Server({"/old" + QUEUE_PATH: (301, "/new" + QUEUE_PATH),
                   "/new" + QUEUE_PATH: (200, json.dumps({"messages_unacknowledged": 3}))})
    servers.append(api)
    got = management_queue(api.url + "/old", "/", "orders", timeout_s=10, password=CANARY)
    assert got == {"messages_unacknowledged": 3}
    assert [path for path, _ in api.seen] == ["/old" + QUEUE_PATH, "/new" + QUEUE_PATH]
    assert all(auth and auth.startswith("Basic ") for _, auth in api.seen)
