"""The one redaction rule: what a message, repr or log line may show of an option's value.

* An option whose **name looks like a credential** never shows its value: ``***`` instead.
  The name is split into words (``.``, ``_``, ``-``, camelCase) and looks like a credential
  when a word is a (mis)spelling of password (``pasword``, ``passwd``, ``pwd``), or is
  secret, token, credential, auth… (not ``authMechanism``), jaas, private, key (not ``keys``,
  not ``key.serializer``),
  keystore, pem, or the name is under ``sasl.``, or is ``ssl_options``. The ``kafka.`` prefix
  does not matter. ``passfile`` (libpq's password file, a path) is not a credential.
* An option jetspark does not know shows no value at all (it may be a misspelt credential).
* Every other value that is shown goes through :func:`redact_dsn`: a URL's password
  (``scheme://user:***@host``), its query parameters whose name looks like a credential
  (``?secret_key=***``, ``?ssl_options=***``) and libpq ``key=value`` pairs likewise
  (``password=***``, quoted values with ``\\'`` escapes included) are masked. URL-like
  options (``url``, ``walLocation`` …) that are malformed show ``***@`` for everything
  before their last ``@``.
* Text from a library (librdkafka, psycopg, pyarrow) is passed through :func:`scrub` with
  the literal secret values of the options (:func:`secret_values`) before it is shown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from urllib.parse import unquote

REDACTED = "***"

_SECRET_WORD = re.compile(
    r"p[a-z]?s+w[a-z]*|passw[a-z]*|pass|pwd|pw|secrets?|se?cre?ts?|tok[e]?ns?|credentials?|creds?"
    r"|auth[a-z]*|jaas|private|privkey|apikey|key|keystore|keyfile|pem|sasl|sig|signature"
)
# Anywhere in the name, even run together (``sslpassword``, ``clientSecret``).
_SECRET_PART = re.compile(r"pa?s+w|pass(?!ive|file)|pwd|secret|token|credential|jaas|private", re.IGNORECASE)
_NOT_SECRET_AFTER_KEY = ("serializer", "deserializer")
_SECRET_NAMES = ("ssl_options",)
_URL_LIKE_NAME = re.compile(r"url|uri|dsn|conninfo|location|servers?", re.IGNORECASE)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+")

# The password runs to the last ``@`` of the authority: raw spaces, quotes and ``@`` included
# (libpq and psycopg refuse such a URL, quoting the password in their error).
_URL_USERINFO = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]*):[^/?#\n]*@", re.I)
_URL_PARAM = re.compile(r"(?P<lead>[?&;])(?P<name>[^=&#\s]+)=(?P<value>[^&#]*)")
# libpq key=value: a value is a single-quoted string (\' and \\ escapes) or a run of non-spaces
# (a quote inside it is part of the value, as libpq reads it).
_KV = re.compile(r"(?P<lead>^|(?<=[\s,(]))(?P<name>[A-Za-z_][\w.-]*)(?P<eq>\s*=\s*)"
                 r"(?P<value>'(?:[^'\\]|\\.)*(?:'|$)|(?:[^\s\\']|\\.)(?:[^\s\\]|\\.)*)", re.S)


def is_secret_option(name: str) -> bool:
    """Whether option ``name`` looks like a credential (see the module doc)."""
    low = name.strip().lower()
    if low.startswith("kafka."):
        low = low[len("kafka."):]
    if low in _SECRET_NAMES or low.startswith("sasl.") or low == "sasl" or _SECRET_PART.search(low):
        return True
    words = [w.lower() for w in _WORD_SPLIT.split(_CAMEL.sub(" ", name)) if w]
    for i, word in enumerate(words):
        if not _SECRET_WORD.fullmatch(word):
            continue
        if word == "key" and i + 1 < len(words) and words[i + 1] in _NOT_SECRET_AFTER_KEY:
            continue
        if word.startswith("auth") and words[i + 1:] == ["mechanism"]:  # its value: PLAIN, EXTERNAL
            continue
        return True
    return False


def redact_dsn(text: str) -> str:
    """``text`` with URL passwords, secret URL parameters and secret libpq ``key=value`` masked.
    A whole libpq ``key=value`` string is parsed as libpq does (:func:`redact_conninfo`)."""
    parsed = redact_conninfo(text)
    if parsed is not None:
        return parsed
    text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", text)
    text = _URL_PARAM.sub(
        lambda m: f"{m['lead']}{m['name']}={REDACTED}" if is_secret_option(m["name"]) else m[0], text)
    return _KV.sub(
        lambda m: f"{m['lead']}{m['name']}{m['eq']}{REDACTED}" if is_secret_option(m["name"]) else m[0], text)


def redact_conninfo(text: str) -> str | None:
    """A libpq ``key=value`` string with every secret-named value masked, or None when
    ``text`` is a URL or not such a string. psycopg parses it as libpq does (quotes,
    escapes); the values it finds for secret names are masked wherever they appear."""
    if "://" in text or "=" not in text:
        return None
    try:
        from psycopg.conninfo import conninfo_to_dict
        params = conninfo_to_dict(text)
    except Exception:  # not a conninfo (or psycopg missing): the patterns of redact_dsn apply
        return None
    secrets = [str(v) for k, v in params.items() if v and is_secret_option(k)]
    masked = _KV.sub(
        lambda m: f"{m['lead']}{m['name']}{m['eq']}{REDACTED}" if is_secret_option(m["name"]) else m[0], text)
    return scrub(masked, sorted(secrets, key=len, reverse=True))


def mask_userinfo(text: str) -> str:
    """A URL-like value, malformed perhaps, with everything before its last ``@`` masked
    (the scheme kept when there is one), then :func:`redact_dsn`."""
    if "@" in text:
        head, _, tail = text.rpartition("@")
        scheme = head[: head.index("://") + 3] if "://" in head else ""
        text = f"{scheme}{REDACTED}@{tail}"
    return redact_dsn(text)


def shown_value(option: str, value: object) -> object:
    """What a message may show of ``value``, the value of option ``option``."""
    if value is None:
        return None
    if is_secret_option(option):
        return REDACTED
    if isinstance(value, str):
        return mask_userinfo(value) if _URL_LIKE_NAME.search(option) else redact_dsn(value)
    if isinstance(value, Mapping):
        return {k: shown_value(str(k), v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(shown_value(option, v) for v in value)
    return value


def secret_values(options: Mapping[str, object] | Iterable[tuple[str, object]]) -> tuple[str, ...]:
    """The literal secrets among ``options`` (name → value): the values of secret-named
    options and the passwords inside URL or key=value values, to :func:`scrub` library text."""
    items = options.items() if isinstance(options, Mapping) else options
    found: list[str] = []
    for name, value in items:
        if value is None:
            continue
        text = str(value)
        if is_secret_option(str(name)):
            found.append(text)
            continue
        for m in _URL_USERINFO.finditer(text):
            password = m.group(0)[len(m["scheme"]) + len(m["user"]) + 1: -1]
            found += [password, unquote(password)]
        for m in _URL_PARAM.finditer(text):
            if is_secret_option(m["name"]):
                found += [m["value"], unquote(m["value"])]
        for m in _KV.finditer(text):
            if is_secret_option(m["name"]):
                value_text = m["value"]
                found.append(value_text)
                if value_text.startswith("'"):
                    found.append(re.sub(r"\\(.)", r"\1", value_text.strip("'")))
    # Longest first: a secret that contains another is replaced whole.
    return tuple(sorted({s for s in found if len(s) >= 3}, key=len, reverse=True))


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every one of ``secrets`` replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


FRAGMENT_MIN = 4


def scrub_fragments(text: str, secrets: Iterable[str], min_run: int = FRAGMENT_MIN) -> str:
    """:func:`scrub`, then every run of ``min_run`` or more characters of ``text`` made of
    pieces of one of ``secrets`` masked too (one ``***`` per run), for librdkafka's texts: it
    quotes the rest of a value from where its parser stopped (``Unrecognized
    sasl.oauthbearer.config beginning at: …``), a piece no whole-value replace finds. It
    over-redacts: a word a secret happens to contain is masked as well."""
    pieces = [s for s in secrets if s]
    text = scrub(text, pieces)
    grams = {s[i:i + min_run] for s in pieces for i in range(len(s) - min_run + 1)}
    if not grams:
        return text
    hidden = bytearray(len(text))
    for i in range(len(text) - min_run + 1):
        if text[i:i + min_run] in grams:
            hidden[i:i + min_run] = b"\x01" * min_run
    out: list[str] = []
    i = 0
    while i < len(text):
        end = i
        while end < len(text) and hidden[end] == hidden[i]:
            end += 1
        run = text[i:end]
        if hidden[i]:  # the white space around a run stays: it is the message's
            core = run.strip()
            run = run[: len(run) - len(run.lstrip())] + REDACTED + run[len(run.rstrip()):] if core else run
        out.append(run)
        i = end
    return "".join(out)


def redacted_repr(obj: object, hidden: Iterable[str] = ()) -> str:
    """The repr of dataclass ``obj`` with every field value passed through :func:`shown_value`
    (a Mapping field per key) and the fields named in ``hidden`` left out."""
    import dataclasses

    skip = set(hidden)
    parts = []
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        if not f.repr or f.name in skip:
            continue
        parts.append(f"{f.name}={shown_value(f.name, getattr(obj, f.name))!r}")
    return f"{type(obj).__name__}({', '.join(parts)})"
