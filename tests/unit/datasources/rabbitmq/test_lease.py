"""The lease on walLocation: one holder, takeover of a dead one, fencing of a stale one."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from jetspark.datasources.rabbitmq.lease import Lease, LeaseHeldError, LeaseLostError, process_start


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_second_holder_is_refused_until_the_first_releases(tmp_path):
    first = Lease(str(tmp_path), 60_000)
    assert first.acquire() == 1
    with pytest.raises(LeaseHeldError, match=r"another run holds walLocation .*\(epoch 1, host "):
        Lease(str(tmp_path), 60_000).acquire()
    first.release()
    second = Lease(str(tmp_path), 60_000)
    assert second.acquire() == 2
    second.check()
    second.release()


def test_a_dead_holder_on_this_host_is_taken_over_at_once(tmp_path):
    dead = Lease(str(tmp_path), 3_600_000, pid=_dead_pid())
    dead.acquire()  # never released: its process is gone, as after SIGKILL
    dead._stop.set()
    successor = Lease(str(tmp_path), 3_600_000)
    assert successor.acquire() == 2
    with pytest.raises(LeaseLostError, match="another run took over"):
        dead.check()  # the old holder, were it still running, could write nothing
    successor.check()
    successor.release()


def test_holder_on_another_host_is_waited_for_then_taken_over(tmp_path):
    now = [1_000_000]
    other = Lease(str(tmp_path), 10_000, clock=lambda: now[0], host="elsewhere")
    other.acquire()
    other._stop.set()  # it stops renewing: a dead driver on another host

    def sleep(_s: float) -> None:
        now[0] += 1_000

    successor = Lease(str(tmp_path), 10_000, clock=lambda: now[0])
    assert successor.acquire(sleep=sleep) == 2
    assert now[0] - 1_000_000 >= 10_000  # it waited for the whole timeout
    successor.release()


def test_renewing_holder_on_another_host_is_refused(tmp_path):
    now = [1_000_000]
    other = Lease(str(tmp_path), 10_000, clock=lambda: now[0], host="elsewhere")
    other.acquire()
    other._stop.set()

    def sleep(_s: float) -> None:  # the other driver renews while we watch
        now[0] += 1_000
        other._write(other.epoch)

    with pytest.raises(LeaseHeldError, match="host elsewhere"):
        Lease(str(tmp_path), 10_000, clock=lambda: now[0]).acquire(sleep=sleep)


def test_a_half_written_lease_file_is_waited_for_not_ignored(tmp_path):
    """A crash while an older version wrote the file: an unknown holder, free after a timeout."""
    (tmp_path / "lease").mkdir()
    (tmp_path / "lease" / f"epoch-{5:020d}.json").write_bytes(b'{"epoch": 5, "own')
    now = [1_000_000]

    def sleep(_s: float) -> None:
        now[0] += 1_000

    lease = Lease(str(tmp_path), 10_000, clock=lambda: now[0])
    assert lease.acquire(sleep=sleep) == 6
    assert now[0] - 1_000_000 >= 10_000
    lease.release()


def test_a_reused_pid_is_not_a_live_holder(tmp_path):
    from jetspark.datasources.rabbitmq.lease import Holder

    me = os.getpid()
    assert Holder(1, "o", "h", me, process_start(me), 0).alive_here()
    assert not Holder(1, "o", "h", me, "0", 0).alive_here()  # same pid, another process's start
    assert Holder(1, "o", "h", me, None, 0).alive_here()  # no start time known: the pid decides
    assert not Holder(1, "o", "h", _dead_pid(), None, 0).alive_here()


def test_takeover_from_another_host_ignores_its_clock(tmp_path):
    """The holder's clock runs an hour behind ours: its lease is still watched a whole timeout."""
    other = Lease(str(tmp_path), 10_000, clock=lambda: 1_000_000 - 3_600_000, host="elsewhere")
    other.acquire()
    other._stop.set()
    now = [1_000_000]

    def sleep(_s: float) -> None:  # it renews once while we watch: alive
        now[0] += 1_000
        if now[0] == 1_005_000:
            other._write(other.epoch)

    other._clock = lambda: now[0] - 3_600_000
    with pytest.raises(LeaseHeldError):
        Lease(str(tmp_path), 10_000, clock=lambda: now[0]).acquire(sleep=sleep)
