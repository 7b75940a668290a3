"""Which librdkafka settings are a producer's only: the scope librdkafka itself documents.

``rd_kafka_conf_properties_show`` prints librdkafka's table of settings with a ``C/P`` column
(``*`` any client, ``C`` consumer, ``P`` producer). Read from the librdkafka confluent-kafka
runs, the rule cannot drift from the library: a consumer built from a producer's settings
(the sink's marker consumer) keeps every one whose scope is not ``P``.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import tempfile
from collections.abc import Mapping

_ROW = re.compile(r"^(?P<name>[\w.]+)\s*\|\s*(?P<scope>[*CP])\s*\|", re.M)


@functools.lru_cache(maxsize=1)
def property_scopes() -> dict[str, str]:
    """Setting name -> ``*``, ``C`` or ``P``, for global and topic settings alike."""
    from jetspark.datasources.kafka.native import librdkafka_path

    lib = ctypes.CDLL(librdkafka_path())
    libc = ctypes.CDLL(None)
    libc.fdopen.restype = ctypes.c_void_p
    libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_conf_properties_show.argtypes = [ctypes.c_void_p]
    with tempfile.TemporaryFile() as f:
        fp = libc.fdopen(os.dup(f.fileno()), b"w")
        if not fp:
            raise OSError(ctypes.get_errno(), "fdopen failed")
        lib.rd_kafka_conf_properties_show(fp)
        libc.fclose(fp)
        f.seek(0)
        text = f.read().decode("utf-8", "replace")
    scopes = {m["name"]: m["scope"] for m in _ROW.finditer(text)}
    if "security.protocol" not in scopes:
        raise OSError("librdkafka printed no table of its settings")
    return scopes


def consumer_settings(client: Mapping[str, str]) -> dict[str, str]:
    """``client``'s settings without those librdkafka scopes to producers only: security
    (``ssl.*``, ``sasl.*``, ``security.protocol``, ``https.ca.*``, the unsecured-JWT switch, …),
    identity and network settings all stay. A name librdkafka does not list stays too, and
    all stay when the table cannot be read (librdkafka then ignores producer settings, warning)."""
    try:
        scopes = property_scopes()
    except (ImportError, OSError):
        return dict(client)
    return {k: v for k, v in client.items() if scopes.get(k) != "P"}
