"""Where and how the queue source connects: the URL, credentials, TLS files, mechanism.

The URL alone can say everything (pika's ``URLParameters``: ``amqps://user:pass@host/vhost``,
``ssl_options`` in its query). The options say it without putting secrets in a URL:
``user``/``password`` override the URL's credentials, ``ssl.*`` (jetkafka's words) give the
CA, the client certificate and its key, and ``authMechanism`` picks ``PLAIN`` (user and
password) or ``EXTERNAL`` (the client certificate is the identity; RabbitMQ's
``rabbitmq_auth_mechanism_ssl`` plugin).
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pika

from jetspark.errors import OptionError
from jetspark.redaction import redacted_repr, scrub, secret_values

MECHANISMS = ("PLAIN", "EXTERNAL")
HOSTNAME_CHECKS = ("https", "none")
"""``ssl.endpoint.identification.algorithm``: verify the broker's name (default) or not."""
TLS_OPTIONS = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
               "ssl.endpoint.identification.algorithm")


@dataclass(frozen=True)
class AmqpEndpoint:
    """A broker to connect to (configuration only)."""

    url: str
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    mechanism: str = "PLAIN"
    ca_location: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True

    def __repr__(self) -> str:  # the URL may carry a password
        return redacted_repr(self)

    def __post_init__(self) -> None:
        try:
            pika.URLParameters(self.url)
        except Exception as e:  # a bad port, ?heartbeat=abc, ssl_options pika cannot evaluate
            reason = _refusal(self.url, e)
            raise OptionError("url", self.url, f"an AMQP URI pika accepts ({reason})") from None
        tls_given = self.ca_location or self.certificate_location or self.key_location
        if not self.is_tls and (tls_given or self.mechanism == "EXTERNAL"):
            option = "authMechanism" if not tls_given else "ssl.*"
            raise OptionError(option, None if option == "ssl.*" else self.mechanism,
                              "an amqps:// url: TLS options and EXTERNAL need TLS")
        if tls_given and "ssl_options" in urlsplit(self.url).query:
            raise OptionError("ssl.*", None, "either the url's ssl_options or the ssl.* options, not both")
        if self.mechanism == "EXTERNAL" and not self.certificate_location and "ssl_options" not in self.url:
            raise OptionError("authMechanism", self.mechanism,
                              "EXTERNAL with a client certificate (option ssl.certificate.location)")
        if bool(self.certificate_location) != bool(self.key_location):
            raise OptionError("ssl.key.location" if self.certificate_location else "ssl.certificate.location",
                              None, "ssl.certificate.location and ssl.key.location together")
        if self.has_tls_files:
            self.tls_context()  # unreadable files fail when the options are parsed, naming the option

    @property
    def is_tls(self) -> bool:
        return self.url.lower().startswith("amqps://")

    @property
    def has_tls_files(self) -> bool:
        return bool(self.ca_location or self.certificate_location)

    def parameters(self) -> pika.URLParameters:
        """pika's parameters of the URL with the options applied."""
        params = pika.URLParameters(self.url)
        if self.user is not None or self.password is not None:
            url_creds = params.credentials
            params.credentials = pika.PlainCredentials(
                self.user if self.user is not None else url_creds.username,
                self.password if self.password is not None else url_creds.password)
        if self.is_tls and (self.has_tls_files or not self.check_hostname):
            params.ssl_options = pika.SSLOptions(self.tls_context(), server_hostname=params.host)
        return params

    def tls_context(self) -> ssl.SSLContext:
        """A client context: the broker's certificate verified against ``ssl.ca.location``
        (else the system's CAs), its name checked unless turned off, the client certificate
        presented when one is given."""
        try:
            ctx = ssl.create_default_context(cafile=self.ca_location)
        except (OSError, ssl.SSLError) as e:
            raise OptionError("ssl.ca.location", self.ca_location,
                              f"a readable PEM file of CA certificates ({_reason(e)})") from None
        ctx.check_hostname = self.check_hostname
        if self.certificate_location:
            try:
                ctx.load_cert_chain(self.certificate_location, self.key_location, password=self.key_password)
            except (OSError, ssl.SSLError) as e:
                raise OptionError("ssl.certificate.location", self.certificate_location,
                                  f"a PEM certificate whose key is ssl.key.location ({_reason(e)})") from None
        return ctx


def _refusal(url: str, e: Exception) -> str:
    """pika's reason, unless it quotes a piece of the URL's user info: a password with an
    unencoded ``/``, ``?`` or ``#`` splits where pika reads a host and port."""
    head = url.split("://", 1)[-1]
    userinfo = head.rpartition("@")[0] if "@" in head else ""
    pieces = [p for p in re.split(r"[:/?#@]", userinfo) if len(p) >= 3]  # shorter: no secret to speak of
    text = scrub(str(e) or type(e).__name__, secret_values({"url": url}))
    if any(p in text for p in pieces):
        return "the user info does not parse: percent-encode / ? # @ and : in a user name or password"
    return text


def _reason(e: BaseException) -> str:
    return getattr(e, "strerror", None) or getattr(e, "reason", None) or type(e).__name__
