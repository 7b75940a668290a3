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


# -- the renewal thread's loop, driven tick by tick --------------------------------------------
class Ticks:
    """Stands in for the lease's stop event: ``wait`` returns False (go on) ``n`` times, each
    tick after ``on_tick``, then True (stop); it records the intervals asked for."""

    def __init__(self, n: int, on_tick=lambda: None) -> None:
        self.left, self.on_tick, self.intervals = n, on_tick, []

    def wait(self, interval: float) -> bool:
        self.intervals.append(interval)
        if self.left == 0:
            return True
        self.left -= 1
        self.on_tick()
        return False

    def set(self) -> None:
        self.left = 0


def _held(tmp_path, now: list[int], timeout_ms: int = 9_000) -> Lease:
    """A lease acquired with its real renewal thread stopped (the test runs the loop itself)."""
    lease = Lease(str(tmp_path), timeout_ms, clock=lambda: now[0])
    lease.acquire()
    lease._stop.set()
    lease._renewer.join()
    return lease


def test_the_renewal_loop_writes_the_clock_every_third_of_the_timeout(tmp_path):
    now = [1_000_000]
    lease = _held(tmp_path, now)
    renewed: list[int] = []

    def tick() -> None:
        now[0] += 3_000

    lease._stop = Ticks(3, tick)
    original = lease._write

    def write(epoch: int, released: bool = False) -> None:
        original(epoch, released)
        renewed.append(lease._read(epoch).renewed_ms)

    lease._write = write
    lease._renew_loop()
    assert lease._stop.intervals == [3.0, 3.0, 3.0, 3.0]  # 9 s / 3, until told to stop
    assert renewed == [1_003_000, 1_006_000, 1_009_000]
    assert lease._newest().renewed_ms == 1_009_000 and not lease._newest().released


def test_the_renewal_keeps_a_watching_successor_out(tmp_path):
    """A successor on another host watches the file for a timeout; the holder's loop renews it
    meanwhile (one tick per successor sleep), so the successor is refused."""
    now = [1_000_000]
    holder = _held(tmp_path, now)
    holder.host = "elsewhere"
    holder._write(holder.epoch)  # the file names the other host
    holder._stop = Ticks(10**6)

    def sleep(_s: float) -> None:
        now[0] += 1_000
        holder._stop.left = 1
        holder._renew_loop()  # one renewal, then the Ticks stop it

    with pytest.raises(LeaseHeldError, match="host elsewhere"):
        Lease(str(tmp_path), 9_000, clock=lambda: now[0]).acquire(sleep=sleep)


def test_the_renewal_loop_stops_without_writing_once_a_successor_took_over(tmp_path):
    now = [1_000_000]
    lease = _held(tmp_path, now)
    lease._write(lease.epoch, released=True)  # as if it had released, then a successor came
    successor = Lease(str(tmp_path), 9_000, clock=lambda: now[0])
    assert successor.acquire() == 2
    before = (tmp_path / "lease" / f"epoch-{1:020d}.json").read_bytes()
    lease._stop = Ticks(5, lambda: now.__setitem__(0, now[0] + 3_000))
    lease._renew_loop()
    assert len(lease._stop.intervals) == 1  # it returned at its first tick, not at the stop
    assert (tmp_path / "lease" / f"epoch-{1:020d}.json").read_bytes() == before
    with pytest.raises(LeaseLostError):
        lease.check()
    successor.release()


def test_a_failed_renewal_is_logged_and_the_next_one_goes_on(tmp_path, caplog):
    now = [1_000_000]
    lease = _held(tmp_path, now)
    original, calls = lease._write, []

    def write(epoch: int, released: bool = False) -> None:
        calls.append(epoch)
        if len(calls) == 1:
            raise OSError("disk full")
        original(epoch, released)

    lease._write = write
    lease._stop = Ticks(2, lambda: now.__setitem__(0, now[0] + 3_000))
    lease._renew_loop()
    assert calls == [1, 1]
    assert "renewing the lease" in caplog.text and "disk full" in caplog.text
    assert lease._newest().renewed_ms == 1_006_000


def test_the_real_renewal_thread_stops_on_release(tmp_path):
    lease = Lease(str(tmp_path), 60_000)
    lease.acquire()
    assert lease._renewer.is_alive() and lease._renewer.daemon
    lease.release()
    assert not lease._renewer.is_alive()
    assert lease._read(1).released
