"""Private folders and files: what jetspark keeps at rest (the queue WAL holds message bodies)
is readable by its owner only, whatever the umask: folders 0700, files 0600.

A folder is never reached through a symlink: ``walLocation`` may lie under a folder anyone can
write to (``/tmp``), where another user can plant a link named like one of ours; following it,
the driver (root perhaps) would make the link's target 0700 or write there. So each folder is
created and opened relative to its parent's descriptor, without following a link, and checked
to be a directory of ours before ``fchmod``.

Later reads, writes and deletes go by path, so the path must stay ours after the check: every
folder a name on the way is looked up in must be one no other user can change — owned by us or
root and not writable by group or others, or, like ``/tmp``, sticky, where others cannot rename
or delete the entry on our way (which must then be ours or root's). Otherwise the owner of a
parent (or anyone, in a folder writable by all) could rename our 0700 folder and put a link to
one of theirs in its place: message bodies would be written where they choose, and WAL files
they planted read as ours."""

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
    _check_parents(folder, target, bool(missing))
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


def _check_parents(existing: str, target: str, creates: bool) -> None:
    """Refuse a path to ``target`` that another user can change after the check (module doc):
    a folder on the way to ``existing`` (or ``existing`` itself, when ``creates`` folders in it)
    owned by another user, or writable by others without the sticky bit; in a sticky folder
    writable by others, an entry on the way that is not ours (nor root's); a symlink on the
    way owned by another user. A symlink's own target is checked the same way."""
    _check_lookups(existing, target)
    if creates:
        _check_folder(existing, None, target)


_WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


def _trusted(uid: int) -> bool:
    return uid in (0, os.getuid())


def _check_lookups(path: str, target: str) -> None:
    folder = "/"
    for name in [n for n in path.split("/") if n]:
        entry = os.path.join(folder, name)
        _check_folder(folder, entry, target)
        try:
            st = os.lstat(entry)
        except OSError:
            return  # gone meanwhile: the opens that follow report it
        if stat.S_ISLNK(st.st_mode):
            if not _trusted(st.st_uid):
                raise UnsafeFolderError(f"the private folder {mask_userinfo(target)} would be reached "
                                        f"through {mask_userinfo(entry)}, a symlink of uid {st.st_uid}; give "
                                        "a path without it")
            real = os.path.realpath(entry)
            if os.path.lexists(real):  # a dangling link: the opens that follow report it
                _check_lookups(real, target)
        folder = entry


def _check_folder(folder: str, entry: str | None, target: str) -> None:
    """``folder`` (links followed: its own path is checked by the caller) cannot be changed by
    another user, nor, if given, its ``entry``."""
    try:
        st = os.stat(folder)
    except OSError:
        return  # not a folder we can look in: the opens that follow report it
    if not stat.S_ISDIR(st.st_mode):
        return
    why = (f"another user could rename the private folder {mask_userinfo(target)} (or a folder on its way) "
           "and put a link to a folder of theirs in its place; choose a walLocation whose parents only "
           "this user or root can change")
    if not _trusted(st.st_uid):
        raise UnsafeFolderError(f"{mask_userinfo(folder)} is owned by uid {st.st_uid}, not by this process "
                                f"(uid {os.getuid()}) nor root: {why}")
    if not st.st_mode & _WRITABLE_BY_OTHERS:
        return
    if not st.st_mode & stat.S_ISVTX:
        raise UnsafeFolderError(f"{mask_userinfo(folder)} is writable by other users (mode "
                                f"{oct(stat.S_IMODE(st.st_mode))}) without the sticky bit: {why}")
    if entry is not None:
        try:
            owner = os.lstat(entry).st_uid
        except OSError:
            return
        if not _trusted(owner):
            raise UnsafeFolderError(f"{mask_userinfo(entry)} is owned by uid {owner}, in "
                                    f"{mask_userinfo(folder)} which others can write to: {why}")


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
