"""Credentials read from a file or the environment instead of the options map.

Every format takes a credential option ``X`` (any option whose name looks like a credential,
see :func:`jetspark.redaction.is_secret_option`: ``password``, ``kafka.sasl.password``,
``kafka.sasl.jaas.config``, ``kafka.ssl.key.password`` …) also as

* ``X.file``: the path of a file whose content is the value (one trailing newline dropped),
  so the secret stays out of the code, the shell history and ``ps``;
* ``X.env``: the name of an environment variable holding the value.

Whoever writes the options chooses the host the credential is sent to, so what a reference
may read is set by whoever runs the Spark processes, in their environment:

* ``JETSPARK_SECRET_DIRS`` (directories, ``:``-separated): an ``X.file`` must be a regular
  file of at most 64 KiB whose real path (symlinks resolved) lies under one of them. Unset or
  empty: no file at all (opt-in: on Kubernetes and in clouds, the usual secret folders also
  hold the workload's own identity tokens, which the options' hosts must not get). Under
  them, the workload-identity token folders (``kubernetes.io``, ``eks.amazonaws.com``,
  ``pods.eks.amazonaws.com``, ``azure``, ``tokens``, e.g.
  ``/var/run/secrets/eks.amazonaws.com/serviceaccount/token``) stay refused unless one of
  them, or a folder inside it, is named itself.
* ``JETSPARK_SECRET_ENV`` (names, ``,``-separated, ``*`` as a wildcard): the variables an
  ``X.env`` may name. Unset: ``JETSPARK_SECRET_*``; empty: none.

They are read where the options are parsed — the driver, and the executors for the parts
that run there — so, like the ``ssl.*.location`` files, the file or variable (and the two
settings) must exist on every machine of the query. A reference is read only when its
option is used, after the unknown options were refused. Giving ``X`` and one of its
references is an error; so is a reference to an option that is not a credential (its value
would not be hidden).
"""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass

from jetspark.errors import OptionError
from jetspark.redaction import is_secret_option

FILE_SUFFIX = ".file"
ENV_SUFFIX = ".env"
MAX_FILE_BYTES = 64 << 10
DIRS_VARIABLE = "JETSPARK_SECRET_DIRS"
ENV_VARIABLE = "JETSPARK_SECRET_ENV"
SUGGESTED_DIRS = "/run/secrets:/run/credentials"
"""Docker's and systemd's secret folders: what the refusal suggests when nothing is set."""
IDENTITY_TOKEN_FOLDERS = ("kubernetes.io", "eks.amazonaws.com", "pods.eks.amazonaws.com", "azure", "tokens")
"""Where Kubernetes, EKS (IRSA, Pod Identity), Azure workload identity and projected tokens put
the workload's own identity, under a secret folder (``/var/run/secrets/<folder>``)."""
DEFAULT_ENV_NAMES = ("JETSPARK_SECRET_*",)


@dataclass(frozen=True)
class SecretReference:
    """``X.file`` or ``X.env`` as given: read by :meth:`read` only when ``X`` is used."""

    option: str
    """The reference's own name (``password.file``), as given."""
    target: str
    """The path or variable name (never shown: its name says what it holds)."""
    base: str
    """The credential option it stands for (``password``)."""

    def __repr__(self) -> str:
        return f"SecretReference({self.option!r})"

    @property
    def is_file(self) -> bool:
        return self.option.lower().endswith(FILE_SUFFIX)

    def read(self, environ: Mapping[str, str] | None = None) -> str:
        """The credential, checked against the settings of ``environ`` (``os.environ``)."""
        env = os.environ if environ is None else environ
        if self.is_file:
            return _read_file(self, env)
        return _read_env(self, env)


def split_secret_references(raw: Mapping[str, str]) -> tuple[dict[str, str], dict[str, SecretReference]]:
    """``raw`` without its references, and the references by the option they stand for;
    misuse is refused here and nothing is read."""
    plain: dict[str, str] = {}
    refs: dict[str, SecretReference] = {}
    given = {str(k).lower() for k in raw}
    for key, value in raw.items():
        name = str(key)
        low = name.lower()
        suffix = next((s for s in (FILE_SUFFIX, ENV_SUFFIX) if low.endswith(s)), None)
        if suffix is None or len(name) == len(suffix):
            plain[key] = value
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
        refs[base] = SecretReference(name, str(value), base)
    return plain, refs


def resolve_secret_references(raw: Mapping[str, str], environ: Mapping[str, str] | None = None
                              ) -> dict[str, str]:
    """``raw`` with every ``X.file`` / ``X.env`` option replaced by ``X`` and its value."""
    plain, refs = split_secret_references(raw)
    return {**plain, **{base: ref.read(environ) for base, ref in refs.items()}}


def _word(suffix: str) -> str:
    return "file" if suffix == FILE_SUFFIX else "environment variable"


def _patterns(env: Mapping[str, str], variable: str, default: tuple[str, ...], sep: str) -> tuple[str, ...]:
    value = env.get(variable)
    if value is None:
        return default
    return tuple(p.strip() for p in value.split(sep) if p.strip())


def _read_env(ref: SecretReference, env: Mapping[str, str]) -> str:
    allowed = _patterns(env, ENV_VARIABLE, DEFAULT_ENV_NAMES, ",")
    name = ref.target.strip()
    if not any(fnmatch.fnmatchcase(name, p) for p in allowed):
        raise OptionError(ref.option, ref.target, f"the name of an environment variable allowed by "
                          f"{ENV_VARIABLE} ({', '.join(allowed) or 'none'}) holding {ref.base}")
    found = env.get(name)
    if found is None:
        raise OptionError(ref.option, ref.target, f"the name of a set environment variable holding "
                          f"{ref.base} (read where the options are parsed: the driver and the executors)")
    return found


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _allowed_dirs(env: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The allowed folders (none unless set) and the identity-token folders refused under them."""
    given = _patterns(env, DIRS_VARIABLE, (), os.pathsep)
    dirs = tuple(os.path.realpath(os.path.expanduser(d)) for d in given)
    parents = {*dirs, "/run/secrets", "/var/run/secrets"}
    excluded = {os.path.realpath(os.path.join(p, name)) for p in parents for name in IDENTITY_TOKEN_FOLDERS}
    return dirs, tuple(e for e in sorted(excluded) if not any(_inside(d, e) for d in dirs))


def _read_file(ref: SecretReference, env: Mapping[str, str]) -> str:
    def refuse(why: str) -> OptionError:
        return OptionError(ref.option, ref.target, f"a regular UTF-8 file of at most {MAX_FILE_BYTES >> 10} "
                           f"KiB holding {ref.base}, under a directory of {DIRS_VARIABLE} ({why})")

    dirs, excluded = _allowed_dirs(env)
    if not dirs:
        raise refuse(f"{DIRS_VARIABLE} is {'empty' if env.get(DIRS_VARIABLE) is not None else 'not set'}, "
                     f"so no file may be read: whoever runs the Spark processes sets it to the folders "
                     f"of the credentials, e.g. {SUGGESTED_DIRS}")
    real = os.path.realpath(os.path.expanduser(ref.target))
    if not any(_inside(real, d) for d in dirs):
        raise refuse(f"it lies outside {os.pathsep.join(dirs)}")
    token_folder = next((e for e in excluded if _inside(real, e)), None)
    if token_folder is not None:
        raise refuse(f"it lies in {token_folder}, a folder of the workload's own identity tokens, refused "
                     f"unless {DIRS_VARIABLE} names it itself")
    try:  # the resolved path, no symlink left; O_NONBLOCK: a FIFO does not block the open
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as e:
        raise refuse(e.strerror or type(e).__name__) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise refuse(kind)
        if st.st_size > MAX_FILE_BYTES:
            raise refuse(f"{st.st_size} bytes")
        data = os.read(fd, MAX_FILE_BYTES + 1)
    except OSError as e:
        raise refuse(e.strerror or type(e).__name__) from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:  # grew since fstat
        raise refuse(f"over {MAX_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise refuse("not UTF-8") from None
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text
