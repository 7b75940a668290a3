"""librdkafka settings that load or run code in the Spark processes, refused by name.

Whoever writes a query's options is not thereby allowed to run code as the Spark processes'
user: a shared library named by ``plugin.library.paths`` or ``ssl.engine.location``, an
OpenSSL provider module (``ssl.providers``) or the shell command of
``sasl.kerberos.kinit.cmd`` would run in the driver and every executor with their files and
credentials. jetkafka's source and sink refuse them with an error naming the option."""

from __future__ import annotations

from collections.abc import Mapping

from jetspark.errors import OptionError

CODE_SETTINGS = {
    "plugin.library.paths": "loads shared libraries (librdkafka plugins)",
    "ssl.engine.location": "loads an OpenSSL engine library",
    "ssl.providers": "loads OpenSSL provider modules",
    "sasl.kerberos.kinit.cmd": "runs a shell command",
}
"""librdkafka setting (``kafka.`` stripped) → what it would do."""


def refuse_code_settings(kafka: Mapping[str, str]) -> None:
    """Raise :class:`OptionError` for the first setting of ``kafka`` that loads or runs code."""
    for key, value in kafka.items():
        does = CODE_SETTINGS.get(key.strip().lower())
        if does is not None:
            raise OptionError(f"kafka.{key}", value,
                              f"not settable: it {does} in the Spark processes, which an option must "
                              f"not choose (refused: kafka.{', kafka.'.join(CODE_SETTINGS)})")
