"""jetkafkashare's driver: which polled records are a batch's rows and which are redeliveries of
records already in a batch (pure logic: the polled records are stand-ins, no consumer)."""

from __future__ import annotations

from dataclasses import dataclass

from jetspark.datasources.kafkashare.driver import ShareDriver
from jetspark.datasources.kafkashare.options import ShareOptions

OPTIONS = ShareOptions.parse({"kafka.bootstrap.servers": "h:1", "kafka.group.id": "g", "subscribe": "t"})


@dataclass
class Record:
    _partition: int
    _offset: int
    _count: int = 1

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def delivery_count(self) -> int:
        return self._count


def test_a_restarted_driver_absorbs_the_redelivery_of_the_batch_it_resumes_from():
    start = {"seq": 4, "acquired": {"t": {"0": [[10, 13, 1]]}}, "absorbed": {},
             "unconfirmed": {"t": {"1": [[5, 6, 1_000]]}}}
    driver = ShareDriver(OPTIONS)
    driver._restore(start)
    emitted, absorbed = driver._split([Record(0, 11, 2), Record(0, 13), Record(1, 5, 2), Record(1, 6)])
    assert emitted.runs() == {"t": {"0": [[13, 14, 1]], "1": [[6, 7, 1]]}}
    assert absorbed.runs() == {"t": {"0": [[11, 12, 2]], "1": [[5, 6, 2]]}}
    # what was absorbed is this member's to ACCEPT now, no longer awaited
    awaited = {key: offsets.tolist() for key, (offsets, _) in driver._unconfirmed.parts.items()}
    assert awaited == {("t", 0): [10, 12]}


def test_a_record_of_a_batch_not_yet_accepted_is_absorbed_when_it_comes_back():
    driver = ShareDriver(OPTIONS)
    driver._restore(driver.initial_offset())
    first, _ = driver._split([Record(0, 0), Record(0, 1)])
    driver._pending[1] = first
    emitted, absorbed = driver._split([Record(0, 1, 2), Record(0, 2)])
    assert emitted.runs() == {"t": {"0": [[2, 3, 1]]}}
    assert absorbed.runs() == {"t": {"0": [[1, 2, 2]]}}


def test_a_replayed_batch_planned_by_a_new_driver_is_awaited_back():
    driver = ShareDriver(OPTIONS)
    start = {"seq": 1, "acquired": {}, "absorbed": {}, "unconfirmed": {}}
    end = {"seq": 2, "acquired": {"t": {"0": [[0, 3, 1]]}}, "absorbed": {},
           "unconfirmed": {"t": {"1": [[7, 8, 1_000]]}}}  # awaited when batch 2 was planned
    driver.planned(start, end)
    emitted, absorbed = driver._split([Record(0, 2, 2), Record(0, 3), Record(1, 7, 3)])
    assert emitted.runs() == {"t": {"0": [[3, 4, 1]]}}
    assert absorbed.runs() == {"t": {"0": [[2, 3, 2]], "1": [[7, 8, 3]]}}
