"""Files of the run directory, which is private: checked on use, and never reached through a symlink.

The run directory has a predictable name (``/tmp/jetspark-<uid>``) in a directory anyone can
write to, and root opens, truncates and chowns files there: a symlink planted by another
user must never make it write or chown elsewhere.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import IO

from jetspark.errors import ServiceError

_FLAGS = {"w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "wb": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
          "ab": os.O_WRONLY | os.O_CREAT | os.O_APPEND}


def private_dir(path: Path, mode: int) -> Path:
    """Create ``path`` (``mode``, e.g. 0o700) or check the one there, then set ``mode``.

    Refused (ServiceError): a symlink, not a directory, not owned by us, or writable by
    group or others (someone else may have put files in it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        pass
    why = "remove it, or set JETSPARK_RUN_DIR to a directory of your own"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        kind = "a symlink" if os.path.islink(path) else f"not a directory we can open ({e.strerror})"
        raise ServiceError(f"the run directory {path} is {kind}; {why}") from None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid():
            raise ServiceError(f"the run directory {path} is owned by uid {st.st_uid}, not by us "
                               f"(uid {os.getuid()}); {why}")
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise ServiceError(f"the run directory {path} is writable by group or others "
                               f"(mode {stat.S_IMODE(st.st_mode):o}); {why}")
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return path


def open_nofollow(path: Path, mode: str) -> IO:
    """``open(path, mode)`` for ``w``, ``wb`` or ``ab`` (0600 when created) that fails when
    ``path`` is a symlink instead of writing through it."""
    fd = os.open(path, _FLAGS[mode] | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    return os.fdopen(fd, mode)


def write_nofollow(path: Path, text: str) -> None:
    """``path.write_text(text)``, never through a symlink."""
    with open_nofollow(path, "w") as f:
        f.write(text)
