"""Spark's ``kafka.sasl.jaas.config`` in librdkafka's words: ``sasl.username`` and ``sasl.password``.

The Java client reads credentials from a JAAS line such as
``org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";``.
librdkafka has no JAAS: for the PLAIN and SCRAM login modules the line becomes its two
settings, so a ``format("kafka")`` job keeps its options. The line holds a password: no
error here carries any part of it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from jetspark.errors import OptionError

OPTION = "kafka.sasl.jaas.config"
# login module -> the sasl.mechanism values its credentials serve
MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
    "org.apache.kafka.common.security.scram.ScramLoginModule": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
}
ACCEPTED = ("one login module line, '<module> required username=\"…\" password=\"…\";', with module "
            + " or ".join(MODULES) + "; other modules (OAUTHBEARER, GSSAPI) have librdkafka settings of "
            "their own: kafka.sasl.oauthbearer.*, kafka.sasl.kerberos.*")
_FLAGS = ("required", "requisite", "sufficient", "optional")
_OPT = re.compile(r'([\w.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')  # key="quoted" or key=bare
_LINE = re.compile(r'\s*(?P<module>[\w.$]+)\s+(?P<flag>\w+)(?P<opts>(?:\s+' + _OPT.pattern + r')*)\s*;\s*')


def translate_jaas(kafka: Mapping[str, str]) -> dict[str, str]:
    """``kafka`` (librdkafka settings, ``kafka.`` stripped) with ``sasl.jaas.config`` replaced by
    ``sasl.username`` and ``sasl.password``; unchanged without it. ``sasl.mechanism`` stays the
    user's and must be one the login module serves."""
    if "sasl.jaas.config" not in kafka:
        return dict(kafka)
    out = dict(kafka)
    line = out.pop("sasl.jaas.config")
    m = _LINE.fullmatch(line)
    if m is None or m["module"] not in MODULES or m["flag"] not in _FLAGS:
        raise OptionError(OPTION, "***", ACCEPTED)
    creds = {o[1]: o[3] if o[2] is None else re.sub(r"\\(.)", r"\1", o[2]) for o in _OPT.finditer(m["opts"])}
    if set(creds) != {"username", "password"}:
        raise OptionError(OPTION, "***", ACCEPTED + " (exactly the options username and password)")
    clash = sorted(k for k in ("sasl.username", "sasl.password") if k in out)
    if clash:
        raise OptionError(OPTION, "***", f"either it or kafka.{' and kafka.'.join(clash)}, not both")
    mechanisms = MODULES[m["module"]]
    mechanism = out.get("sasl.mechanism", out.get("sasl.mechanisms"))
    if mechanism not in mechanisms:
        raise OptionError("kafka.sasl.mechanism", mechanism,
                          f"{' or '.join(mechanisms)}, the mechanism {m['module'].rsplit('.', 1)[1]} "
                          f"of {OPTION} serves")
    out["sasl.username"] = creds["username"]
    out["sasl.password"] = creds["password"]
    return out
