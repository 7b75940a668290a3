"""The folders ``jetspark inspect`` reads — a query's ``checkpointLocation`` and jetrabbitmq's
``walLocation`` — on local disk or on S3, GCS, HDFS or Azure, through the pyarrow filesystems
that ``walLocation`` is written with (:mod:`jetspark.filesystems`). Read-only: nothing is
created, renamed or deleted.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from jetspark.errors import JetsparkError, OptionError
from jetspark.filesystems import open_location
from jetspark.redaction import redact_dsn, scrub, secret_values, shown_value


@dataclass(frozen=True)
class Folder:
    """A folder to read: its filesystem, its root path there and its location as shown."""

    fs: pafs.FileSystem
    root: str
    shown: str
    """The location as messages show it (user info and key parameters masked)."""
    option: str
    location: str
    error: type[JetsparkError] = JetsparkError
    """The error a file that cannot be read raises."""

    @property
    def local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    def where(self, *parts: str) -> str:
        """A file's name in messages: the shown location joined with ``parts``."""
        return posixpath.join(self.shown, *parts)

    def _path(self, parts: tuple[str, ...]) -> str:
        return posixpath.join(self.root, *parts)

    def _failed(self, parts: tuple[str, ...], e: Exception) -> JetsparkError:
        reason = redact_dsn(scrub(str(e), secret_values({self.option: self.location})))
        return self.error(f"{self.where(*parts)}: cannot be read ({reason})")

    def kind(self, *parts: str) -> str | None:
        """``"dir"``, ``"file"`` or None (missing)."""
        try:
            info = self.fs.get_file_info(self._path(parts))
        except (pa.ArrowException, OSError) as e:
            raise self._failed(parts, e) from None
        return {pafs.FileType.Directory: "dir", pafs.FileType.File: "file"}.get(info.type)

    def _infos(self, parts: tuple[str, ...]) -> list[pafs.FileInfo]:
        try:
            return self.fs.get_file_info(pafs.FileSelector(self._path(parts), allow_not_found=True))
        except (pa.ArrowException, OSError) as e:
            raise self._failed(parts, e) from None

    def sizes(self, *parts: str) -> dict[str, int]:
        """The files directly in a subfolder, name → size (no hidden files); {} when it is missing."""
        return {i.base_name: i.size or 0 for i in self._infos(parts)
                if i.type == pafs.FileType.File and not i.base_name.startswith(".")}

    def names(self, *parts: str) -> list[str]:
        """Files and folders directly in a subfolder (sorted); [] when it is missing."""
        return sorted(i.base_name for i in self._infos(parts))

    def read_bytes(self, *parts: str) -> bytes | None:
        """A file's bytes; None when it does not exist (purged by the running query meanwhile)."""
        try:
            with self.fs.open_input_stream(self._path(parts)) as f:
                return f.read()
        except FileNotFoundError:
            return None
        except (pa.ArrowException, OSError) as e:
            if self.kind(*parts) is None:
                return None
            raise self._failed(parts, e) from None


def open_folder(location: str, option: str, error: type[JetsparkError] = JetsparkError) -> Folder:
    """The folder ``location`` (the value of ``option``: a local path or a filesystem URI).

    Raises ``error`` naming the location (credentials masked) when pyarrow cannot open it, when
    it does not exist, and when a local one is not readable by this user.
    """
    shown = str(shown_value(option, location))
    try:
        fs, root = open_location(location, option)
    except OptionError as e:
        raise error(str(e)) from None
    folder = Folder(fs, root, shown, option, location, error)
    kind = folder.kind()
    if kind != "dir":
        raise error(f"{shown}: no such folder" if kind is None else f"{shown}: a file, not a folder")
    if folder.local and not os.access(root, os.R_OK | os.X_OK):
        raise error(f"{shown}: not readable by this user (a query makes its folders 0700: "
                            "inspect as the user that runs the query)")
    return folder
