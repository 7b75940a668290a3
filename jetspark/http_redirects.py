"""Redirects followed only to the same origin: a request that carries credentials (HTTP basic
or bearer authentication) must not take them to another scheme, host or port, which urllib's
default redirect handler would do."""

from __future__ import annotations

import urllib.parse
import urllib.request

from jetspark.redaction import mask_userinfo


class SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to the request's own origin; raises ``error(message)`` else,
    the message naming ``what`` answered and ending with ``hint``."""

    def __init__(self, what: str, error: type[Exception], hint: str) -> None:
        self.what, self.error, self.hint = what, error, hint

    def redirect_request(self, req: urllib.request.Request, fp: object, code: int, msg: str, headers: object,
                         newurl: str) -> urllib.request.Request | None:
        if origin(newurl) != origin(req.full_url):
            raise self.error(
                f"{self.what}: answered {code} with a redirect to {mask_userinfo(newurl)}, another scheme, "
                f"host or port; its credentials are not sent there: {self.hint}")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def origin(url: str) -> tuple[str, str, int | None]:
    """A URL's scheme, host and port (the scheme's default port when none is given)."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(scheme)
