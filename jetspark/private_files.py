"""Private folders and files: what jetspark keeps at rest (the queue WAL holds message bodies)
is readable by its owner only, whatever the umask: folders 0700, files 0600."""

from __future__ import annotations

import os
from typing import BinaryIO

import pyarrow.fs as pafs

DIR_MODE = 0o700
FILE_MODE = 0o600


def make_private_dir(fs: pafs.FileSystem, path: str) -> None:
    """Create ``path`` and missing parents; on a local filesystem the folders it creates and
    ``path`` itself are 0700 (other filesystems keep their own access control)."""
    if not isinstance(fs, pafs.LocalFileSystem):
        fs.create_dir(path, recursive=True)
        return
    missing = []
    folder = os.path.abspath(path)
    while not os.path.isdir(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:  # another process made it meanwhile
            continue
        os.chmod(folder, DIR_MODE)  # exact, whatever the umask
    os.chmod(path, DIR_MODE)


def open_private(path: str) -> BinaryIO:
    """A new local file, 0600 from its creation (it must not exist), open for writing."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE), "wb")
