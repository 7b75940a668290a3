"""A client of a Schema Registry's REST API (Confluent's, as Apicurio's ``/apis/ccompat/v7``
also serves it): schemas by id, a subject's versions, registration.

Schemas are immutable once they have an id, so :meth:`RegistryClient.schema` keeps each one
for the life of the process (every client of the same registry shares it): a read task asks
the registry once per schema id and worker process, never per record. So is a refusal about
the id itself (a 4xx answer other than 401, 408 and 429, or a body that is no schema): 2,000
unknown ids cost 2,000 requests once, not on every replay. A numbered version of a subject
(what a Protobuf schema's imports name) is kept likewise; a subject's *latest* version is
asked for each time it is wanted (it moves).

Every request has a total deadline, ``schemaRegistry.timeout`` (over its URLs, its retries
after HTTP 429 — waiting as ``Retry-After`` asks, within the deadline — and the reading of the
body), and reads at most :data:`MAX_BODY_BYTES` of an answer.

Settings are those of confluent-kafka's ``SchemaRegistryClient`` under the option prefix
``schemaRegistry.``; credentials (``basic.auth.user.info``, ``bearer.auth.token``,
``ssl.key.password``, a URL's user info) never appear in an error or a repr.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from jetspark.errors import JetsparkError, OptionError
from jetspark.http_redirects import SameOriginRedirects
from jetspark.options import Options
from jetspark.redaction import mask_userinfo, redacted_repr

PREFIX = "schemaRegistry."
OPTIONS = tuple(PREFIX + name for name in (
    "url", "basic.auth.user.info", "bearer.auth.token", "ssl.ca.location", "ssl.certificate.location",
    "ssl.key.location", "ssl.key.password", "timeout"))
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_RETRIABLE = (408, 429, 500, 502, 503, 504)
"""Answers after which the next URL is asked (confluent-kafka's client does the same)."""
_DEFAULT_TIMEOUT_MS = 30_000
MAX_BODY_BYTES = 8 << 20
"""The largest answer read (8 MiB): a larger schema is refused, its body never held whole."""
_MAX_REMEMBERED = 100_000
"""The most refusals kept per process (the oldest go first)."""
_FIRST_BACKOFF_S = 0.1


class SchemaRegistryError(JetsparkError):
    """The Schema Registry could not be reached, or refused or did not know what was asked."""

    def __init__(self, message: str, status: int | None = None, error_code: int | None = None, *,
                 answered: bool | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.answered = (status is not None and 400 <= status < 500 and status not in (401, 408)
                         if answered is None else answered)
        """The registry answered about what was asked (a 4xx other than 401 and 408, or a body
        that is no schema): the schema cannot be had, and asking again changes nothing (but
        429). False: the registry could not be reached, refused the credentials or failed."""

    @property
    def lasting(self) -> bool:
        """An answer about the request that asking again would repeat (kept for the process)."""
        return self.answered and self.status != 429


@dataclass(frozen=True)
class RegistrySettings:
    """Where the registry is and how to talk to it (``schemaRegistry.*``), parsed once."""

    urls: tuple[str, ...]
    user_info: str | None = field(default=None, repr=False)
    """``user:password`` for HTTP basic authentication."""
    bearer_token: str | None = field(default=None, repr=False)
    ca_location: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None
    key_password: str | None = field(default=None, repr=False)
    timeout_s: float = _DEFAULT_TIMEOUT_MS / 1000

    def __repr__(self) -> str:
        return redacted_repr(self)

    @classmethod
    def parse(cls, opts: Options) -> RegistrySettings | None:
        """The settings, or None when ``schemaRegistry.url`` is not given."""
        raw = opts.string(PREFIX + "url")
        if raw is None:
            return None
        urls = tuple(u.strip().rstrip("/") for u in raw.split(",") if u.strip())
        accepted = "http(s)://host[:port][/path], comma-separated"
        if not urls:
            raise OptionError(PREFIX + "url", raw, accepted)
        for url in urls:
            parts = urllib.parse.urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise OptionError(PREFIX + "url", raw, accepted)
        user_info = opts.string(PREFIX + "basic.auth.user.info")
        bearer = opts.string(PREFIX + "bearer.auth.token")
        if user_info is not None and ":" not in user_info:
            raise OptionError(PREFIX + "basic.auth.user.info", user_info, "user:password")
        in_url = any(urllib.parse.urlsplit(u).username is not None for u in urls)
        if sum([user_info is not None, bearer is not None, in_url]) > 1:
            given = "a URL's user info" if in_url else PREFIX + "basic.auth.user.info"
            name, value = (("bearer.auth.token", bearer) if bearer is not None
                           else ("basic.auth.user.info", user_info))
            raise OptionError(PREFIX + name, value, f"one way to authenticate only ({given} is given too)")
        timeout_ms = opts.duration_with_unit_ms(
            PREFIX + "timeout", _DEFAULT_TIMEOUT_MS,
            bare="confluent-kafka's client reads it as seconds, jetspark's other durations as milliseconds")
        return cls(
            urls=urls, user_info=user_info, bearer_token=bearer,
            ca_location=opts.string(PREFIX + "ssl.ca.location"),
            certificate_location=opts.string(PREFIX + "ssl.certificate.location"),
            key_location=opts.string(PREFIX + "ssl.key.location"),
            key_password=opts.string(PREFIX + "ssl.key.password"), timeout_s=timeout_ms / 1000,
        )


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry holds it: its id, type (``AVRO``, ``PROTOBUF``, ``JSON``) and
    text, and, when it was found through a subject, the subject and version."""

    schema_id: int
    schema_type: str
    text: str
    references: tuple[tuple[str, str, int], ...] = ()
    """(name, subject, version) of each schema this one refers to."""
    subject: str | None = None
    version: int | None = None


_BY_ID: dict[tuple, RegisteredSchema | SchemaRegistryError] = {}
"""Schemas by (settings, id, serialized) and numbered versions by (settings, subject, version,
serialized), and the lasting refusals of either: the settings hold the credentials, so what one
user was given (or refused) is never another's answer."""
_SERIALIZED = "?format=serialized"
_BY_ID_LOCK = threading.Lock()


def _remembered(key: tuple, ask) -> RegisteredSchema:
    """The answer kept for ``key``, else ``ask()``'s, kept (a lasting refusal too, re-raised)."""
    with _BY_ID_LOCK:
        found = _BY_ID.get(key)
    if found is None:
        try:
            found = ask()
        except SchemaRegistryError as e:
            if not e.lasting:
                raise
            found = e
        with _BY_ID_LOCK:
            refusals = [k for k, v in _BY_ID.items() if isinstance(v, SchemaRegistryError)]
            if isinstance(found, SchemaRegistryError) and len(refusals) >= _MAX_REMEMBERED:
                del _BY_ID[refusals[0]]
            _BY_ID[key] = found
    if isinstance(found, SchemaRegistryError):
        raise SchemaRegistryError(str(found), found.status, found.error_code, answered=True)
    return found


class RegistryClient:
    """Requests to one registry (its URLs tried in turn when one cannot be reached)."""

    def __init__(self, settings: RegistrySettings) -> None:
        self.settings = settings
        self._context = _tls_context(settings)
        self._opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=self._context),
            SameOriginRedirects("the Schema Registry", SchemaRegistryError,
                                f"give that URL itself in {PREFIX}url if it is the registry"))

    def __repr__(self) -> str:
        return f"RegistryClient({self.settings!r})"

    def schema(self, schema_id: int, *, serialized: bool = False) -> RegisteredSchema:
        """The schema with this id (cached for the process). ``serialized``: a Protobuf schema
        as a base64 ``FileDescriptorProto`` rather than ``.proto`` text (Confluent's
        ``?format=serialized``; a registry that stored the serialized form gives it anyway)."""
        path = f"/schemas/ids/{schema_id}{_SERIALIZED if serialized else ''}"
        return _remembered((self.settings, schema_id, serialized),
                           lambda: _registered(self._get(path), schema_id, path=path))

    def version(self, subject: str, version: int | None = None, *,
                serialized: bool = False) -> RegisteredSchema:
        """Version ``version`` of ``subject`` (None: its latest version now); ``serialized`` as
        for :meth:`schema`."""
        which = "latest" if version is None else str(version)
        path = f"/subjects/{_quote(subject)}/versions/{which}{_SERIALIZED if serialized else ''}"

        def ask() -> RegisteredSchema:
            body = self._get(path)
            return _registered(body, None, subject=body.get("subject", subject) if isinstance(body, dict)
                               else subject, version=version, path=path)

        if version is None:
            return ask()
        return _remembered((self.settings, subject, version, serialized), ask)

    def register(self, subject: str, schema_type: str, text: str) -> int:
        """Register ``text`` under ``subject`` (or find it there); its schema id."""
        payload = {"schema": text}
        if schema_type != "AVRO":
            payload["schemaType"] = schema_type
        body = self._request("POST", f"/subjects/{_quote(subject)}/versions", payload)
        return int(body["id"])

    def lookup(self, subject: str, schema_type: str, text: str) -> RegisteredSchema:
        """The version of ``subject`` whose schema is ``text`` (the registry's error when none)."""
        payload = {"schema": text}
        if schema_type != "AVRO":
            payload["schemaType"] = schema_type
        body = self._request("POST", f"/subjects/{_quote(subject)}", payload)
        return _registered(body, int(body["id"]), subject=subject, version=int(body["version"]))

    # -- HTTP ---------------------------------------------------------------------------------
    def _get(self, path: str) -> object:
        return self._request("GET", path, None)

    def _request(self, method: str, path: str, payload: dict | None) -> object:
        data = None if payload is None else json.dumps(payload).encode()
        deadline = time.monotonic() + self.settings.timeout_s
        failures: list[str] = []
        throttled: SchemaRegistryError | None = None
        backoff = _FIRST_BACKOFF_S
        while True:
            wait = None
            for base in self.settings.urls:  # the next URL when one cannot answer now (as confluent-kafka)
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                request = urllib.request.Request(_without_user_info(base) + path, data=data, method=method,
                                                 headers=self._headers(base, payload is not None))
                try:
                    with self._opener.open(request, timeout=left) as response:
                        body = _body(response, deadline, method, path, base)
                except urllib.error.HTTPError as e:
                    error = _answer_error(e, method, path, base)
                    if e.code not in _RETRIABLE:
                        raise error from None
                    failures.append(str(error))
                    if e.code == 429:
                        throttled, wait = error, max(backoff, _retry_after(e, backoff))
                    continue
                except (urllib.error.URLError, OSError) as e:
                    failures.append(f"{mask_userinfo(base)}: {getattr(e, 'reason', e)}")
                    continue
                return _json(body, method, path, base)
            left = deadline - time.monotonic()
            if wait is None or left <= 0:
                break
            time.sleep(min(wait, left))  # throttled (429): ask again when it says, within the deadline
            backoff *= 2
        if throttled is not None:
            raise throttled  # the registry is there, but will not answer this now
        raise SchemaRegistryError(
            f"cannot reach the Schema Registry ({PREFIX}url) for {method} {path}: "
            f"{'; '.join(failures[-4:]) or 'no answer in time'} (waited up to {self.settings.timeout_s:g} s "
            f"in all, {PREFIX}timeout)")

    def _headers(self, base: str, has_body: bool) -> dict[str, str]:
        headers = {"Accept": _CONTENT_TYPE}
        if has_body:
            headers["Content-Type"] = _CONTENT_TYPE
        parts = urllib.parse.urlsplit(base)
        user_info = self.settings.user_info
        if user_info is None and parts.username is not None:
            user_info = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        if user_info is not None:
            headers["Authorization"] = "Basic " + base64.b64encode(user_info.encode()).decode()
        elif self.settings.bearer_token is not None:
            headers["Authorization"] = "Bearer " + self.settings.bearer_token
        return headers


def _without_user_info(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def _registered(body: object, schema_id: int | None, *, subject: str | None = None,
                version: int | None = None, path: str = "") -> RegisteredSchema:
    """The schema of an answer; a body that is no schema (a registry that does not check what
    it stores, or not the registry) is a lasting refusal of what was asked."""
    try:
        refs = tuple((_text(r["name"]), _text(r["subject"]), int(r["version"]))
                     for r in body.get("references") or ())
        return RegisteredSchema(
            schema_id=int(body["id"]) if schema_id is None else schema_id,
            schema_type=_text(body.get("schemaType") or "AVRO"), text=_text(body["schema"]),
            references=refs, subject=subject,
            version=int(body["version"]) if version is None and "version" in body else version)
    except (AttributeError, KeyError, TypeError, ValueError, OverflowError) as e:
        raise SchemaRegistryError(f"the Schema Registry answered GET {path} with no schema "
                                  f"({type(e).__name__}: {str(e)[:80]})", answered=True) from None


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{type(value).__name__} where a string belongs")
    return value


def _body(response, deadline: float, method: str, path: str, base: str) -> bytes:
    """The answer's body: at most MAX_BODY_BYTES, read before the deadline (TimeoutError)."""
    chunks, size = [], 0
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError("the answer did not arrive in time")
        chunk = response.read1(1 << 16)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise SchemaRegistryError(
                f"the Schema Registry at {mask_userinfo(base)} answered {method} {path} with more than "
                f"{MAX_BODY_BYTES >> 20} MiB (not read further)", answered=True)
        chunks.append(chunk)


def _json(body: bytes, method: str, path: str, base: str) -> object:
    try:
        return json.loads(body or b"{}")
    except ValueError:
        raise SchemaRegistryError(
            f"the Schema Registry at {mask_userinfo(base)} answered {method} {path} with something that "
            f"is not JSON ({body[:60]!r}): is {PREFIX}url the registry's API?") from None


def _retry_after(e: urllib.error.HTTPError, backoff: float) -> float:
    """How long to wait after a 429: its ``Retry-After`` seconds, else ``backoff``."""
    try:
        return max(0.0, float(e.headers.get("Retry-After", backoff)))
    except (TypeError, ValueError):
        return backoff


def _answer_error(e: urllib.error.HTTPError, method: str, path: str, base: str) -> SchemaRegistryError:
    """The registry's refusal, with its own error code and message (Confluent's error body)."""
    try:
        body = json.loads(e.read(64 << 10) or b"{}")
        body = body if isinstance(body, dict) else {}
    except (ValueError, OSError):
        body = {}
    code = body.get("error_code")
    text = body.get("message") or e.reason
    hint = ""
    if e.code in (401, 403):
        hint = f" (options {PREFIX}basic.auth.user.info, {PREFIX}bearer.auth.token)"
    return SchemaRegistryError(
        f"the Schema Registry at {mask_userinfo(base)} answered {method} {path} with HTTP {e.code}"
        f"{f' (error {code})' if code else ''}: {text}{hint}", status=e.code, error_code=code)


def _tls_context(settings: RegistrySettings) -> ssl.SSLContext | None:
    if not any(u.startswith("https:") for u in settings.urls):
        return None
    context = ssl.create_default_context(cafile=settings.ca_location)
    if settings.certificate_location is not None:
        try:
            context.load_cert_chain(settings.certificate_location, settings.key_location,
                                    password=settings.key_password)
        except (OSError, ssl.SSLError) as e:
            raise OptionError(PREFIX + "ssl.certificate.location", settings.certificate_location,
                              f"a PEM certificate with its key ({PREFIX}ssl.key.location, "
                              f"{PREFIX}ssl.key.password): {type(e).__name__}") from None
    return context
