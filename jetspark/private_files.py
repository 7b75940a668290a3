"""Private folders and files: what jetspark keeps at rest (the queue WAL holds message bodies)
is readable by its owner only, whatever the umask: folders 0700, files 0600.

A folder is never reached through a symlink: ``walLocation`` may lie under a folder anyone can
write to (``/tmp``), where another user can plant a link named like one of ours; following it,
the driver (root perhaps) would make the link's target 0700 or write there. So each folder is
created and opened relative to its parent's descriptor, without following a link, and checked
to be a directory of ours before ``fchmod``."""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

import pyarrow.fs as pafs

from jetspark.errors import JetsparkError
from jetspark.redaction import mask_userinfo

DIR_MODE = 0o700
FILE_MODE = 0o600
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafeFolderError(JetsparkError, PermissionError):
    """A private folder's path is a symlink, not a directory, or a directory of another user."""


def make_private_dir(fs: pafs.FileSystem, path: str) -> None:
    """Create ``path`` and missing parents; on a local filesystem the folders it creates and
    ``path`` itself are 0700 (other filesystems keep their own access control).

    Refused (:class:`UnsafeFolderError`): ``path`` or a folder it would create is a symlink or
    not a directory, or is owned by another user; an existing parent that is a symlink owned
    by another user (nor root)."""
    if not isinstance(fs, pafs.LocalFileSystem):
        fs.create_dir(path, recursive=True)
        return
    target = os.path.abspath(path)
    missing: list[str] = []
    folder = target
    while not os.path.lexists(folder) and os.path.dirname(folder) != folder:
        missing.append(os.path.basename(folder))
        folder = os.path.dirname(folder)
    _check_parents(folder, target)
    if not missing:
        os.close(_own(None, folder, folder, target))
        return
    try:  # an existing parent (checked above): a link to a folder is followed
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise _not_a_folder(None, folder, folder, target, e) from None
    try:
        for name in reversed(missing):
            try:
                os.mkdir(name, DIR_MODE, dir_fd=fd)
            except FileExistsError:  # another process made it meanwhile (or planted something)
                pass
            folder = os.path.join(folder, name)
            child = _own(fd, name, folder, target)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


def _check_parents(existing: str, target: str) -> None:
    """Refuse a symlink among ``existing`` and its parents owned by neither us nor root."""
    folder = existing
    while True:
        st = os.lstat(folder)
        if stat.S_ISLNK(st.st_mode) and st.st_uid not in (0, os.getuid()):
            raise UnsafeFolderError(f"the private folder {mask_userinfo(target)} would be reached through "
                                    f"{mask_userinfo(folder)}, a symlink of uid {st.st_uid}; give a path "
                                    "without it")
        parent = os.path.dirname(folder)
        if parent == folder:
            return
        folder = parent


def _own(dir_fd: int | None, name: str, path: str, target: str) -> int:
    """Open folder ``name`` (under ``dir_fd``; ``path`` in messages) without following a link,
    check it is a directory of ours, make it 0700; its descriptor. ``target``: the folder asked for."""
    try:
        fd = os.open(name, _OPEN_DIR, dir_fd=dir_fd)
    except OSError as e:
        raise _not_a_folder(dir_fd, name, path, target, e) from None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid():
            raise UnsafeFolderError(f"{mask_userinfo(path)} is owned by uid {st.st_uid}, not by this "
                                    f"process (uid {os.getuid()}); {_why(target)}")
        os.fchmod(fd, DIR_MODE)  # exact, whatever the umask
    except BaseException:
        os.close(fd)
        raise
    return fd


def _why(target: str) -> str:
    return f"remove it or choose another walLocation (wanted: the private folder {mask_userinfo(target)})"


def _not_a_folder(dir_fd: int | None, name: str, path: str, target: str, error: OSError) -> UnsafeFolderError:
    try:
        st = os.lstat(name, dir_fd=dir_fd)
        kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a directory"
    except OSError:
        kind = f"not a directory we can open ({error.strerror})"
    return UnsafeFolderError(f"{mask_userinfo(path)} is {kind}; {_why(target)}")


def open_private(path: str) -> BinaryIO:
    """A new local file, 0600 from its creation (it must not exist, nor be a symlink), open
    for writing."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.fdopen(os.open(path, flags, FILE_MODE), "wb")
