"""The sink algorithm on the transactional-resource protocol, with an in-memory resource."""

from __future__ import annotations

import pyarrow as pa
import pytest

from jetspark.sinks.transactional import (
    PartitionKey,
    SinkCommitMessage,
    TransactionalResource,
    abort_batch,
    commit_batch,
    write_partition,
)


class MemoryResource(TransactionalResource):
    """A toy transactional store: prepared transactions by handle, committed rows, markers."""

    def __init__(self, remote: bool, store: dict | None = None, fail_on_write: bool = False) -> None:
        self.supports_remote_commit = remote
        self.store = store if store is not None else {"prepared": {}, "rows": [], "markers": set()}
        self.fail_on_write = fail_on_write
        self.log: list[str] = []
        self._open: tuple[PartitionKey, list] | None = None

    def recover(self, key):
        prefix = (key.sink_id, key.batch_id, key.partition_id)
        for handle in [h for h in self.store["prepared"] if h[:3] == prefix]:
            self.rollback(handle)
        return prefix in self.store["markers"]

    def begin(self, key):
        self._open = (key, [])

    def write(self, batch):
        if self.fail_on_write:
            raise RuntimeError("disk full")
        self._open[1].extend(batch.column(0).to_pylist())
        return batch.num_rows

    def prepare(self):
        key, rows = self._open
        handle = (key.sink_id, key.batch_id, key.partition_id, key.attempt)
        self.store["prepared"][handle] = rows
        self._open = None
        return handle

    def commit(self, handle):
        self.log.append(f"commit {handle}")
        rows = self.store["prepared"].pop(handle)
        self.store["rows"].extend(rows)
        self.store["markers"].add(handle[:3])

    def rollback(self, handle=None):
        self.log.append(f"rollback {handle}")
        if handle is None:
            self._open = None
        else:
            self.store["prepared"].pop(handle, None)

    def rollback_strays(self, sink_id, up_to_batch):
        strays = [h for h in self.store["prepared"] if h[0] == sink_id and h[1] <= up_to_batch]
        for h in strays:
            self.rollback(h)
        return strays


def _batches(*ids):
    return iter([pa.RecordBatch.from_pydict({"id": list(ids)}), pa.RecordBatch.from_pydict({"id": []})])


def test_two_phase_task_leaves_prepared_handle_and_driver_commits():
    r = MemoryResource(remote=True)
    msgs = [write_partition(r, PartitionKey("s", 0, p, 0), _batches(p * 10, p * 10 + 1)) for p in (0, 1)]
    assert all(m.handle is not None and not m.skipped for m in msgs)
    assert [m.rows for m in msgs] == [2, 2]
    assert r.store["rows"] == []  # nothing visible before the driver commits
    commit_batch(r, msgs, 0)
    assert sorted(r.store["rows"]) == [0, 1, 10, 11]


def test_local_commit_resource_commits_in_task():
    r = MemoryResource(remote=False)
    m = write_partition(r, PartitionKey("s", 0, 0, 0), _batches(1, 2))
    assert m.handle is None and r.store["rows"] == [1, 2]


def test_replayed_committed_partition_is_skipped_and_input_consumed():
    r = MemoryResource(remote=True)
    commit_batch(r, [write_partition(r, PartitionKey("s", 3, 0, 0), _batches(1))], 3)
    consumed = []

    def source():
        for b in _batches(1):
            consumed.append(b)
            yield b
    replay = write_partition(r, PartitionKey("s", 3, 0, 0), source())
    assert replay.skipped and replay.handle is None and len(consumed) == 2
    commit_batch(r, [replay], 3)
    assert r.store["rows"] == [1]


def test_retry_rolls_back_the_earlier_attempts_prepared_transaction():
    r = MemoryResource(remote=True)
    first = write_partition(r, PartitionKey("s", 0, 0, 0), _batches(7))  # attempt 0 prepared, then lost
    second = write_partition(r, PartitionKey("s", 0, 0, 1), _batches(7))
    assert f"rollback {first.handle}" in r.log
    commit_batch(r, [second], 0)
    assert r.store["rows"] == [7] and r.store["prepared"] == {}


def test_failed_write_rolls_back_and_raises():
    r = MemoryResource(remote=True, fail_on_write=True)
    with pytest.raises(RuntimeError, match="disk full"):
        write_partition(r, PartitionKey("s", 0, 0, 0), _batches(1))
    assert r.log[-1] == "rollback None" and r.store["prepared"] == {}


def test_commit_rolls_back_strays_of_this_and_older_batches_only():
    store = {"prepared": {}, "rows": [], "markers": set()}
    r = MemoryResource(remote=True, store=store)
    stray_old = write_partition(r, PartitionKey("s", 1, 5, 0), _batches(100)).handle
    stray_same = write_partition(r, PartitionKey("s", 2, 6, 1), _batches(200)).handle
    future = write_partition(r, PartitionKey("s", 3, 0, 0), _batches(300)).handle
    other_sink = write_partition(r, PartitionKey("t", 1, 0, 0), _batches(400)).handle
    winner = write_partition(r, PartitionKey("s", 2, 0, 0), _batches(1))
    commit_batch(r, [winner, None], 2)
    assert store["rows"] == [1]
    assert set(store["prepared"]) == {future, other_sink}
    assert stray_old not in store["prepared"] and stray_same not in store["prepared"]


def test_abort_rolls_back_every_prepared_handle():
    r = MemoryResource(remote=True)
    msgs = [write_partition(r, PartitionKey("s", 0, p, 0), _batches(p)) for p in (0, 1)]
    abort_batch(r, [*msgs, None, SinkCommitMessage("s", 0, 2, 0, 0, skipped=True)])
    assert r.store["prepared"] == {} and r.store["rows"] == []


class UntouchableResource(MemoryResource):
    def recover(self, key):
        raise AssertionError("an empty partition must not reach the resource")


@pytest.mark.parametrize("remote", [True, False])
def test_a_partition_without_rows_opens_no_transaction_and_writes_no_marker(remote):
    r = UntouchableResource(remote=remote)
    empty = iter([pa.RecordBatch.from_pydict({"id": []}), pa.RecordBatch.from_pydict({"id": []})])
    msg = write_partition(r, PartitionKey("s", 3, 7, 0), empty)
    assert (msg.rows, msg.handle, msg.skipped) == (0, None, False)
    assert r.store == {"prepared": {}, "rows": [], "markers": set()} and r.log == []
    commit_batch(MemoryResource(remote=remote), [msg], 3)  # the driver has nothing to commit for it


def test_rows_after_empty_batches_are_all_written():
    r = MemoryResource(remote=True)
    batches = iter([pa.RecordBatch.from_pydict({"id": []}), pa.RecordBatch.from_pydict({"id": [1, 2]}),
                    pa.RecordBatch.from_pydict({"id": [3]})])
    msg = write_partition(r, PartitionKey("s", 0, 0, 0), batches)
    commit_batch(r, [msg], 0)
    assert msg.rows == 3 and r.store["rows"] == [1, 2, 3] and r.store["markers"] == {("s", 0, 0)}
