"""One query, one driver: a lease on ``walLocation`` with a fencing epoch.

Two drivers on one checkpoint and ``walLocation`` (a restart script that runs while the old
driver lives, a scheduler that retries) would both take deliveries from the queue, and the
acks and dedup entries of one would describe the WAL of the other. The lease makes the second
driver stop with :class:`LeaseHeldError` before it consumes anything.

Layout: ``<walLocation>/lease/epoch-<N>.json``, one file per holder, ``N`` increasing. The
newest file names the holder (a random ``owner`` ID, host, pid and the process's start time)
and when it last renewed the lease. A driver takes the lease by creating the next epoch's file
exclusively (on a local filesystem: ``link()`` of a complete temporary file; on other
pyarrow filesystems — HDFS, object stores — a check before the write, so two drivers
starting within the same instant there are not told apart: see the design document).
The newest file is free when:

* it says ``released`` (the previous driver stopped cleanly), or
* its holder ran on this host and that process is gone (pid and start time), or
* its holder ran on another host (or its file cannot be read) and the new driver, watching
  it for ``leaseTimeout`` on its own clock, saw no renewal: a renewal in that time means a
  live holder (error), none a dead one (taken over).

The holder renews its file every third of ``leaseTimeout`` from a daemon thread. Before it
changes the WAL or the dedup store or acks a batch, :meth:`Lease.check` lists the lease
directory: a newer epoch than its own means a successor took over, and the driver stops
with :class:`LeaseLostError` instead of writing. The epoch also names the WAL files and is
recorded in the offsets, so a batch's WAL file is always the one its writer's offset names
(see :mod:`.driver`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow.fs as pafs

from jetspark.datasources.rabbitmq.wal import durable_write, fsync_dir, list_files
from jetspark.errors import JetsparkError
from jetspark.filesystems import open_location
from jetspark.private_files import make_private_dir, open_private
from jetspark.redaction import shown_value

log = logging.getLogger(__name__)

LEASE_DIR = "lease"
_PREFIX = "epoch-"
_SUFFIX = ".json"
_KEEP_FILES = 3


class LeaseHeldError(JetsparkError):
    """Another run holds the lease on ``walLocation``."""


class LeaseLostError(JetsparkError):
    """A successor took the lease over while this driver still ran."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def process_start(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2:].split()
    return fields[19].decode()  # field 22 of proc(5), counted after "pid (comm)"


@dataclass(frozen=True)
class Holder:
    """What one lease file says."""

    epoch: int
    owner: str
    host: str
    pid: int
    started: str | None
    renewed_ms: int
    released: bool = False

    def describe(self, now_ms: int) -> str:
        return (f"epoch {self.epoch}, host {self.host}, pid {self.pid}, "
                f"renewed {max(0, now_ms - self.renewed_ms) / 1000:.1f} s ago")

    def alive_here(self) -> bool:
        """Same host: is the holding process still running? (pid and start time; where the
        start time is unknown, the pid alone, which errs towards "alive")."""
        if self.started is not None:
            return process_start(self.pid) == self.started
        if self.pid <= 0:
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


class Lease:
    """The lease of one driver on one ``walLocation`` (see the module doc)."""

    def __init__(self, location: str, timeout_ms: int, *, clock: Callable[[], int] = _now_ms,
                 host: str | None = None, pid: int | None = None) -> None:
        self.location = location
        self.shown_location = str(shown_value("walLocation", location))  # for messages
        self.timeout_ms = timeout_ms
        self._clock = clock
        self.fs, root = open_location(location)
        self.directory = f"{root}/{LEASE_DIR}"
        self.host = host or socket.gethostname()
        self.pid = os.getpid() if pid is None else pid
        self.owner = uuid.uuid4().hex
        self.epoch: int | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    # -- taking and giving back ------------------------------------------------------------
    def acquire(self, *, sleep: Callable[[float], None] = time.sleep) -> int:
        """Take the lease (raises :class:`LeaseHeldError` while another run holds it)."""
        make_private_dir(self.fs, self.directory)
        newest = self._newest()
        if newest is not None and not newest.released:
            self._wait_until_free(newest, sleep)
        epoch = 1 if newest is None else newest.epoch + 1
        if not self._create(epoch):
            held = self._newest()
            raise LeaseHeldError(self._held_message(held))
        self.epoch = epoch
        self._prune(epoch)
        self._renewer = threading.Thread(target=self._renew_loop, name="jetrabbitmq-lease", daemon=True)
        self._renewer.start()
        return epoch

    def _shown(self, e: OSError) -> str:
        """``e``'s text with the lease folder's path as :attr:`shown_location` shows it (the
        location may hold credentials, or a folder name that looks like them)."""
        text = str(e)
        root = self.directory[: -len(LEASE_DIR) - 1]
        for raw in (self.directory, root, self.location):
            if raw:
                text = text.replace(raw, self.shown_location if raw != self.directory
                                    else f"{self.shown_location}/{LEASE_DIR}")
        return text

    def release(self) -> None:
        """Give the lease back (a successor takes it at once); no-op when lost or not held."""
        self._stop.set()
        if self._renewer is not None:  # its last write must not undo "released"
            self._renewer.join()
        if self.epoch is None:
            return
        try:
            if self._newest_epoch() == self.epoch:
                self._write(self.epoch, released=True)
        except OSError as e:  # the next driver then waits for the timeout or our process's end
            log.warning("jetrabbitmq: could not release the lease on %s: %s", self.shown_location,
                        self._shown(e))
        self.epoch = None

    def check(self) -> None:
        """Fencing: raise :class:`LeaseLostError` unless this driver still holds the newest epoch."""
        if self.epoch is None:
            raise LeaseLostError(
                f"jetrabbitmq: this driver holds no lease on walLocation {self.shown_location!r}")
        newest = self._newest_epoch()
        if newest != self.epoch:
            holder = self._read(newest) if newest is not None else None
            who = holder.describe(self._clock()) if holder else "its files are gone"
            raise LeaseLostError(
                f"jetrabbitmq: another run took over walLocation {self.shown_location!r} ({who}) while this "
                f"driver (epoch {self.epoch}) still ran; this driver stops without writing or acking"
            )

    # -- internals -------------------------------------------------------------------------
    def _wait_until_free(self, held: Holder, sleep: Callable[[float], None]) -> None:
        if held.host == self.host:
            if held.alive_here():
                raise LeaseHeldError(self._held_message(held))
            return
        # Another host: only silence for a whole timeout, measured on our own clock (clocks of
        # two hosts differ), tells a dead holder from a live one.
        deadline = self._clock() + self.timeout_ms
        while self._clock() < deadline:
            sleep(min(1.0, self.timeout_ms / 10_000))
            now = self._newest()
            if now is None or now.released:
                return
            if (now.epoch, now.owner, now.renewed_ms) != (held.epoch, held.owner, held.renewed_ms) \
                    and not now.owner.startswith("unreadable:"):
                raise LeaseHeldError(self._held_message(now))

    def _held_message(self, held: Holder | None) -> str:
        who = held.describe(self._clock()) if held else "unknown holder"
        return (
            f"jetrabbitmq: another run holds walLocation {self.shown_location!r} ({who}); one query runs on "
            "one driver at a time. Stop the other run first. If it died, its lease is free as soon as "
            "its process is gone (same host) or after leaseTimeout "
            f"({self.timeout_ms / 1000:.0f} s) without renewal (another host)."
        )

    def _name(self, epoch: int) -> str:
        return f"{_PREFIX}{epoch:020d}{_SUFFIX}"

    def _epochs(self) -> list[int]:
        return [int(n[len(_PREFIX):-len(_SUFFIX)]) for n in list_files(self.fs, self.directory, _SUFFIX)
                if n.startswith(_PREFIX)]

    def _newest_epoch(self) -> int | None:
        return max(self._epochs(), default=None)

    def _newest(self) -> Holder | None:
        epoch = self._newest_epoch()
        return None if epoch is None else self._read(epoch)

    def _read(self, epoch: int) -> Holder | None:
        """The holder of ``epoch``; an unreadable file counts as held by an unknown holder on
        another host (it frees only after a timeout without change), never as free."""
        path = f"{self.directory}/{self._name(epoch)}"
        try:
            with self.fs.open_input_stream(path) as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        try:
            data = json.loads(raw)
            return Holder(epoch, data["owner"], data["host"], int(data["pid"]), data.get("started"),
                          int(data["renewedMs"]), bool(data.get("released", False)))
        except (ValueError, KeyError, TypeError):
            return Holder(epoch, f"unreadable:{len(raw)}", "?", -1, None, self._clock())

    def _content(self, epoch: int, released: bool = False) -> bytes:
        return json.dumps({
            "epoch": epoch, "owner": self.owner, "host": self.host, "pid": self.pid,
            "started": process_start(self.pid), "renewedMs": self._clock(), "released": released,
        }).encode()

    def _create(self, epoch: int) -> bool:
        """Create the epoch's file unless it exists (exclusively where the filesystem can)."""
        path = f"{self.directory}/{self._name(epoch)}"
        data = self._content(epoch)
        if isinstance(self.fs, pafs.LocalFileSystem):
            # link() of a complete, fsynced temporary file: exclusive, and never half-written
            tmp = f"{path}.{uuid.uuid4().hex}.tmp"
            with open_private(tmp) as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            finally:
                os.unlink(tmp)
            fsync_dir(self.directory)
            return True
        if self.fs.get_file_info(path).type != pafs.FileType.NotFound:
            return False
        durable_write(self.fs, path, data)
        return True

    def _write(self, epoch: int, released: bool = False) -> None:
        durable_write(self.fs, f"{self.directory}/{self._name(epoch)}", self._content(epoch, released))

    def _prune(self, epoch: int) -> None:
        for old in self._epochs():
            if old <= epoch - _KEEP_FILES:
                try:
                    self.fs.delete_file(f"{self.directory}/{self._name(old)}")
                except FileNotFoundError:
                    pass

    def _renew_loop(self) -> None:
        interval = max(self.timeout_ms / 3000, 0.05)
        while not self._stop.wait(interval):
            epoch = self.epoch
            if epoch is None:
                return
            try:
                if self._newest_epoch() != epoch:
                    return  # lost: check() reports it on the next write or ack
                self._write(epoch)
            except OSError as e:
                log.warning("jetrabbitmq: renewing the lease on %s failed: %s", self.shown_location,
                            self._shown(e))
