"""A client of a Schema Registry's REST API (Confluent's, as Apicurio's ``/apis/ccompat/v7``
also serves it): schemas by id, a subject's versions, registration.

Schemas are immutable once they have an id, so :meth:`RegistryClient.schema` keeps each one
for the life of the process (every client of the same registry shares it): a read task asks
the registry once per schema id and worker process, never per record. A subject's *latest*
version is asked for each time it is wanted (it moves).

Settings are those of confluent-kafka's ``SchemaRegistryClient`` under the option prefix
``schemaRegistry.``; credentials (``basic.auth.user.info``, ``bearer.auth.token``,
``ssl.key.password``, a URL's user info) never appear in an error or a repr.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
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


class SchemaRegistryError(JetsparkError):
    """The Schema Registry could not be reached, or refused or did not know what was asked."""

    def __init__(self, message: str, status: int | None = None, error_code: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code


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


_BY_ID: dict[tuple[tuple[str, ...], int, bool], RegisteredSchema] = {}
_SERIALIZED = "?format=serialized"
_BY_ID_LOCK = threading.Lock()


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
        key = (self.settings.urls, schema_id, serialized)
        with _BY_ID_LOCK:
            found = _BY_ID.get(key)
        if found is not None:
            return found
        body = self._get(f"/schemas/ids/{schema_id}{_SERIALIZED if serialized else ''}")
        found = _registered(body, schema_id)
        with _BY_ID_LOCK:
            _BY_ID[key] = found
        return found

    def version(self, subject: str, version: int | None = None, *,
                serialized: bool = False) -> RegisteredSchema:
        """Version ``version`` of ``subject`` (None: its latest version now); ``serialized`` as
        for :meth:`schema`."""
        which = "latest" if version is None else str(version)
        body = self._get(f"/subjects/{_quote(subject)}/versions/{which}{_SERIALIZED if serialized else ''}")
        return _registered(body, int(body["id"]), subject=body.get("subject", subject),
                           version=int(body["version"]))

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
    def _get(self, path: str) -> dict:
        return self._request("GET", path, None)

    def _request(self, method: str, path: str, payload: dict | None) -> dict:
        data = None if payload is None else json.dumps(payload).encode()
        failures = []
        for base in self.settings.urls:  # the next URL when one cannot answer now (as confluent-kafka)
            request = urllib.request.Request(_without_user_info(base) + path, data=data, method=method,
                                             headers=self._headers(base, payload is not None))
            try:
                with self._opener.open(request, timeout=self.settings.timeout_s) as response:
                    body = response.read()
            except urllib.error.HTTPError as e:
                error = _answer_error(e, method, path, base)
                if e.code not in _RETRIABLE:
                    raise error from None
                failures.append(str(error))
                continue
            except (urllib.error.URLError, OSError) as e:
                failures.append(f"{mask_userinfo(base)}: {getattr(e, 'reason', e)}")
                continue
            try:
                return json.loads(body or b"{}")
            except ValueError:
                raise SchemaRegistryError(
                    f"the Schema Registry at {mask_userinfo(base)} answered {method} {path} with something "
                    f"that is not JSON ({body[:60]!r}): is {PREFIX}url the registry's API?") from None
        raise SchemaRegistryError(
            f"cannot reach the Schema Registry ({PREFIX}url) for {method} {path}: {'; '.join(failures)} "
            f"(each waited up to {self.settings.timeout_s:g} s, {PREFIX}timeout)")

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


def _registered(body: dict, schema_id: int, *, subject: str | None = None,
                version: int | None = None) -> RegisteredSchema:
    refs = tuple((r["name"], r["subject"], int(r["version"])) for r in body.get("references") or ())
    return RegisteredSchema(schema_id=schema_id, schema_type=body.get("schemaType") or "AVRO",
                            text=body["schema"], references=refs, subject=subject, version=version)


def _answer_error(e: urllib.error.HTTPError, method: str, path: str, base: str) -> SchemaRegistryError:
    """The registry's refusal, with its own error code and message (Confluent's error body)."""
    try:
        body = json.loads(e.read() or b"{}")
    except ValueError:
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
