"""Credentials read from a file or the environment instead of the options map.

Every format takes a credential option ``X`` (any option whose name looks like a credential,
see :func:`jetspark.redaction.is_secret_option`: ``password``, ``kafka.sasl.password``,
``kafka.sasl.jaas.config``, ``kafka.ssl.key.password`` …) also as

* ``X.file``: the path of a file whose content is the value (one trailing newline dropped),
  so the secret stays out of the code, the shell history and ``ps``;
* ``X.env``: the name of an environment variable holding the value.

They are read where the options are parsed — the driver, and the executors for the parts
that run there — so, like the ``ssl.*.location`` files, the file or variable must exist on
every machine of the query. Giving ``X`` and one of its references is an error; so is a
reference to an option that is not a credential (its value would not be hidden).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from jetspark.errors import OptionError
from jetspark.redaction import is_secret_option

FILE_SUFFIX = ".file"
ENV_SUFFIX = ".env"


def resolve_secret_references(raw: Mapping[str, str]) -> dict[str, str]:
    """``raw`` with every ``X.file`` / ``X.env`` option replaced by ``X`` and its value."""
    out = dict(raw)
    given = {str(k).lower() for k in raw}
    for key, value in raw.items():
        name = str(key)
        low = name.lower()
        suffix = next((s for s in (FILE_SUFFIX, ENV_SUFFIX) if low.endswith(s)), None)
        if suffix is None or len(name) == len(suffix):
            continue
        base = name[: -len(suffix)]
        if not is_secret_option(base):
            raise OptionError(name, value, f"only a credential option can be read from a {_word(suffix)}; "
                              f"give {base} itself")
        if base.lower() in given:
            raise OptionError(name, value, f"either {base} or {name}, not both")
        others = [s for s in (FILE_SUFFIX, ENV_SUFFIX) if s != suffix and (base + s).lower() in given]
        if others:
            raise OptionError(name, value, f"either {name} or {base}{others[0]}, not both")
        del out[key]
        out[base] = _read(name, str(value), suffix, base)
    return out


def _word(suffix: str) -> str:
    return "file" if suffix == FILE_SUFFIX else "environment variable"


def _read(name: str, value: str, suffix: str, base: str) -> str:
    if suffix == ENV_SUFFIX:
        found = os.environ.get(value.strip())
        if found is None:
            raise OptionError(name, value, f"the name of a set environment variable holding {base} "
                              "(read where the options are parsed: the driver and the executors)")
        return found
    try:
        text = Path(value).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else type(e).__name__
        raise OptionError(name, value, f"a readable UTF-8 file holding {base} ({reason})") from None
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text
