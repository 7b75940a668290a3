"""The jetkafka stream reader's offset logic against a fake broker (pure logic, injected clock)."""

from __future__ import annotations

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from jetspark.datasources.kafka import source as kafka_source
from jetspark.datasources.kafka.consumers import DataLossError
from jetspark.datasources.kafka.options import KafkaSourceOptions
from jetspark.datasources.kafka.source import PACKED_TASK_OFFSETS, Heartbeat, KafkaRange, KafkaStreamReader

T = "t"


class FakeBroker:
    """Partitions 0 and 1 of topic t; record i of partition p has timestamp ts0[p] + i."""

    def __init__(self) -> None:
        self.low = {(T, 0): 0, (T, 1): 0}
        self.high = {(T, 0): 0, (T, 1): 0}
        self.ts0 = {(T, 0): 1_000, (T, 1): 1_000}

    def topic_partitions(self):
        return sorted(self.high)

    def earliest(self, tps):
        return {tp: self.low[tp] for tp in tps}

    def latest(self, tps):
        return {tp: self.high[tp] for tp in tps}

    def max_timestamp(self, tps):
        return {tp: (self.high[tp] - 1, self.ts0[tp] + self.high[tp] - 1) if self.high[tp] else (-1, -1)
                for tp in tps}

    def data_record_timestamps(self, offsets):
        """Every offset below the end holds a data record (no transactions here)."""
        return {tp: self.ts0[tp] + o if o < self.high[tp] else None for tp, o in offsets.items()}

    def close(self):
        pass


class Clock:
    def __init__(self) -> None:
        self.now = 10_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def setup(monkeypatch):
    broker = FakeBroker()

    def scan(kafka, ranges, **_):  # what a driver read would find: the last record is the max
        return {tp: broker.ts0[tp] + end - 1 for tp, (start, end) in ranges.items()}

    monkeypatch.setattr(kafka_source, "scan_max_timestamps", scan)

    def make(**extra):
        options = KafkaSourceOptions.parse(
            {"kafka.bootstrap.servers": "h:1", "subscribe": T, "startingOffsets": "earliest",
             "watermark.idleTimeout": "10 seconds", **extra}, streaming=True)
        clock = Clock()
        reader = KafkaStreamReader(options, clock)
        reader._broker = broker
        return reader, clock

    return broker, make


def test_first_batch_records_where_it_started_and_replays_the_same_ranges(setup):
    broker, make = setup
    broker.high = {(T, 0): 5, (T, 1): 3}
    reader, _ = make(startingOffsets="latest")
    initial = reader.initialOffset()
    assert initial["offsets"] == {T: {"0": 5, "1": 3}} and initial["initial"] is True
    broker.high = {(T, 0): 9, (T, 1): 4}
    end = reader.latestOffset(initial, ReadAllAvailable())
    assert end["from"] == {T: {"0": 5, "1": 3}} and end["offsets"] == {T: {"0": 9, "1": 4}}
    assert end["watermark"] == min(1_000 + 8, 1_000 + 3)
    # after a crash Spark replays batch 0 with a NEW initialOffset (latest has moved on)
    broker.high = {(T, 0): 20, (T, 1): 20}
    replay_start = make(startingOffsets="latest")[0].initialOffset()
    ranges = [(s.partition, s.start, s.end) for p in reader.partitions(replay_start, end) for s in p.specs]
    assert ranges == [(0, 5, 9), (1, 3, 4)]


def test_nothing_new_returns_start_itself(setup):
    broker, make = setup
    broker.high = {(T, 0): 2, (T, 1): 2}
    reader, _ = make()
    end = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    assert reader.latestOffset(end, ReadAllAvailable()) is end


def test_max_rows_prorates_and_the_watermark_follows_what_was_admitted(setup):
    broker, make = setup
    broker.high = {(T, 0): 30, (T, 1): 10}
    reader, _ = make(maxOffsetsPerTrigger="8")
    assert reader.getDefaultReadLimit() == ReadMaxRows(8)
    end = reader.latestOffset(reader.initialOffset(), ReadMaxRows(8))
    assert end["offsets"] == {T: {"0": 6, "1": 2}}
    assert end["partitions"][T]["0"]["maxTs"] == 1_005 and end["watermark"] == 1_001


def test_idle_partition_is_left_out_and_w_moves_with_a_heartbeat(setup):
    broker, make = setup
    broker.high = {(T, 0): 5, (T, 1): 0}
    reader, clock = make()
    first = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    assert first["watermark"] is None  # partition 1: no data, not idle yet
    clock.now += 5_000
    broker.high[(T, 0)] = 6
    second = reader.latestOffset(first, ReadAllAvailable())
    assert second["watermark"] is None
    clock.now += 6_000  # partition 1 idle (11 s), partition 0 advanced 6 s ago: not idle
    third = reader.latestOffset(second, ReadAllAvailable())
    assert third is not second and third["offsets"] == second["offsets"]
    assert third["partitions"][T]["1"]["idle"] is True and third["watermark"] == 1_005
    parts = reader.partitions(second, third)
    assert len(parts) == 1 and isinstance(parts[0], Heartbeat) and parts[0].watermark == 1_005


def test_new_partition_starts_at_earliest(setup):
    broker, make = setup
    broker.high = {(T, 0): 3, (T, 1): 3}
    reader, _ = make()
    end = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    broker.low[(T, 2)], broker.high[(T, 2)], broker.ts0[(T, 2)] = 4, 7, 5_000
    broker.high[(T, 0)] = 4
    nxt = reader.latestOffset(end, ReadAllAvailable())
    assert nxt["from"] == {T: {"2": 4}} and nxt["offsets"][T]["2"] == 7
    spans = {s.partition: (s.start, s.end) for p in reader.partitions(end, nxt) for s in p.specs}
    assert spans == {0: (3, 4), 2: (4, 7)}


def test_data_loss_fails_or_skips(setup):
    broker, make = setup
    broker.high = {(T, 0): 5, (T, 1): 5}
    reader, _ = make()
    end = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    broker.low[(T, 0)], broker.high[(T, 0)] = 8, 10
    with pytest.raises(DataLossError, match=r"topic 't' partition 0: offsets from 5 .* earliest .* is 8"):
        reader.latestOffset(end, ReadAllAvailable())
    skipping, _ = make(failOnDataLoss="false")
    nxt = skipping.latestOffset(end, ReadAllAvailable())
    assert nxt["from"] == {T: {"0": 8}} and nxt["offsets"][T]["0"] == 10


def test_available_now_stops_at_the_target(setup):
    broker, make = setup
    broker.high = {(T, 0): 5, (T, 1): 5}
    reader, _ = make()
    start = reader.initialOffset()
    reader.prepareForTriggerAvailableNow()
    broker.high = {(T, 0): 50, (T, 1): 50}
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end["offsets"] == {T: {"0": 5, "1": 5}}
    assert reader.latestOffset(end, ReadAllAvailable()) is end


def test_min_rows_waits_until_enough_or_max_trigger_delay(setup):
    broker, make = setup
    broker.high = {(T, 0): 3, (T, 1): 0}
    reader, clock = make(minOffsetsPerTrigger="10", maxTriggerDelay="1 minute")
    start = reader.initialOffset()
    assert reader.latestOffset(start, ReadMinRows(10)) is start
    clock.now += 61_000
    assert reader.latestOffset(start, ReadMinRows(10))["offsets"][T]["0"] == 3


def test_a_range_task_carries_the_watermark_facts_of_the_batch_start(setup):
    broker, make = setup
    broker.high = {(T, 0): 4, (T, 1): 4}
    reader, _ = make(**{"watermark.lag": "2 ms"})
    first = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    broker.high = {(T, 0): 6, (T, 1): 6}
    second = reader.latestOffset(first, ReadAllAvailable())
    spec = next(p.specs[0] for p in reader.partitions(first, second) if isinstance(p, KafkaRange))
    facts = (spec.start, spec.end, spec.start_max_ts, spec.w_prev, spec.watermark)
    assert facts == (4, 6, 1_003, 1_001, 1_003)


def test_records_arriving_meanwhile_extend_the_batch_to_the_max_timestamp_record(setup):
    broker, make = setup
    broker.high = {(T, 0): 5, (T, 1): 5}
    reader, _ = make()
    start = reader.initialOffset()
    listed_max = broker.max_timestamp

    def racing_max_timestamp(tps):  # 3 more records land on partition 0 before the question
        broker.high[(T, 0)] = 8
        return listed_max(tps)

    broker.max_timestamp = racing_max_timestamp
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end["offsets"][T] == {"0": 8, "1": 5}
    assert end["partitions"][T]["0"]["maxTs"] == 1_007
    limited, _ = make(maxOffsetsPerTrigger="100")  # under a rate limit it reads the timestamps instead
    broker.high[(T, 0)] = 5
    end = limited.latestOffset(start, ReadMaxRows(100))
    assert end["offsets"][T] == {"0": 5, "1": 5} and end["partitions"][T]["0"]["maxTs"] == 1_004


def test_the_future_cut_off_is_fixed_at_planning_and_kept_in_the_offset(setup, monkeypatch):
    """watermark.maxFutureSkew: a ListOffsets maximum beyond the cut-off sends the partition to
    the driver's scan, which gets the cut-off; read tasks get the offset's cut-off, whatever
    the reader's clock says when the batch is replayed."""
    broker, make = setup
    reader, clock = make(**{"watermark.maxFutureSkew": "1 second", "eventTime.onMalformed": "null"})
    start = reader.initialOffset()
    broker.high = {(T, 0): 4, (T, 1): 4}
    broker.ts0[(T, 0)] = clock.now + 5_000  # partition 0's producer clock is 5 s ahead
    scans = []

    def scan(kafka, ranges, *, cutoff_ms, on_malformed, **_):
        scans.append((dict(ranges), cutoff_ms, on_malformed))
        return {tp: None for tp in ranges}  # every record of the range beyond the cut-off

    monkeypatch.setattr(kafka_source, "scan_max_timestamps", scan)
    end = reader.latestOffset(start, ReadAllAvailable())
    cutoff = clock.now + 1_000
    assert end["futureCutoff"] == cutoff
    assert scans == [({(T, 0): (0, 4)}, cutoff, "null")]  # partition 1's answer is on time: no scan
    assert end["partitions"][T]["0"]["maxTs"] is None and end["partitions"][T]["1"]["maxTs"] == 1_003
    assert end["watermark"] is None  # partition 0 holds W back; its future records did not move it

    clock.now += 3_600_000  # a replay an hour later decides with the offset's cut-off
    specs = [s for p in reader.partitions(start, end) if isinstance(p, KafkaRange) for s in p.specs]
    assert [s.future_cutoff for s in specs] == [cutoff, cutoff]
    old = {k: v for k, v in end.items() if k != "futureCutoff"}  # written before the option
    replayed = [s for p in reader.partitions(start, old) if isinstance(p, KafkaRange) for s in p.specs]
    assert [s.future_cutoff for s in replayed] == [None, None]


def test_without_the_option_there_is_no_cut_off(setup):
    broker, make = setup
    reader, clock = make()
    broker.high = {(T, 0): 2, (T, 1): 2}
    broker.ts0[(T, 0)] = clock.now + 10 * 365 * 86_400_000
    end = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    assert "futureCutoff" not in end and end["partitions"][T]["0"]["maxTs"] == broker.ts0[(T, 0)] + 1


class FakeGroup:
    def __init__(self) -> None:
        self.commits: list[dict] = []

    def commit(self, offsets) -> None:
        self.commits.append(dict(offsets))

    def close(self) -> None:
        pass


def test_latest_offset_is_reported_whatever_the_limit_admitted(setup):
    broker, make = setup
    reader, _ = make(maxOffsetsPerTrigger="4")
    assert reader.reportLatestOffset() is None
    broker.high = {(T, 0): 10, (T, 1): 6}
    end = reader.latestOffset(reader.initialOffset(), ReadMaxRows(4))
    assert sum(end["offsets"][T].values()) <= 4  # the limit admitted part of the backlog
    behind = [10 - end["offsets"][T]["0"], 6 - end["offsets"][T]["1"]]
    # Spark's Kafka source metrics (SPARK-34854) ride along: how far the batch's end is behind
    assert reader.reportLatestOffset() == {
        "offsets": {T: {"0": 10, "1": 6}}, "minOffsetsBehindLatest": min(behind),
        "maxOffsetsBehindLatest": max(behind), "avgOffsetsBehindLatest": sum(behind) / 2}


def test_group_gets_a_batch_end_only_once_spark_has_committed_the_batch(setup):
    broker, make = setup
    reader, _ = make(**{"kafka.group.id": "lag", "commitOffsetsToGroup": "true"})
    group = reader._group = FakeGroup()
    broker.high = {(T, 0): 3, (T, 1): 2}
    first = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    assert group.commits == []  # the initial offset is no batch's end
    broker.high = {(T, 0): 5, (T, 1): 2}
    reader.latestOffset(first, ReadAllAvailable())  # Spark plans batch 1: batch 0 is committed
    assert group.commits == [{(T, 0): 3, (T, 1): 2}]
    reader.commit(first)
    assert group.commits[-1] == {(T, 0): 3, (T, 1): 2}


def test_without_the_option_nothing_is_committed_to_a_group(setup):
    _, make = setup
    reader, _ = make()
    assert reader._group is None
    reader.commit({"offsets": {T: {"0": 1}}})


def test_a_small_batch_shares_one_read_task_unless_min_partitions_asks_for_more(setup):
    """Each read task is a Python worker round trip: a batch's ranges share tasks of up to
    PACKED_TASK_OFFSETS (or maxRecordsPerPartition) offsets; minPartitions keeps a task per range."""
    broker, make = setup
    broker.high = {(T, 0): 5, (T, 1): 3}

    def tasks(reader):
        start = reader.initialOffset()
        return [[(s.partition, s.start, s.end) for s in p.specs]
                for p in reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))]

    assert tasks(make()[0]) == [[(0, 0, 5), (1, 0, 3)]]
    assert tasks(make(maxRecordsPerPartition="6")[0]) == [[(0, 0, 5)], [(1, 0, 3)]]
    # split as Spark's KafkaOffsetRangeCalculator splits: the last part takes the remainder
    assert tasks(make(maxRecordsPerPartition="4")[0]) == [[(0, 0, 2)], [(0, 2, 5)], [(1, 0, 3)]]
    assert tasks(make(maxRecordsPerPartition="8")[0]) == [[(0, 0, 5), (1, 0, 3)]]
    assert tasks(make(minPartitions="2")[0]) == [[(0, 0, 5)], [(1, 0, 3)]]


def test_a_replay_packs_by_the_budget_in_the_offset_not_by_todays_options(setup):
    """The packing budget is kept in the end offset: a replay after an upgrade or an option
    change plans the tasks the first attempt planned; an older offset has a task per range."""
    broker, make = setup
    broker.high = {(T, 0): 5, (T, 1): 3}
    reader = make()[0]
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end["taskOffsets"] == PACKED_TASK_OFFSETS

    def tasks(offset):
        replaying = make(minPartitions="2")[0]
        return [[(s.partition, s.start, s.end) for s in p.specs] for p in replaying.partitions(start, offset)]

    assert tasks(end) == [[(0, 0, 5), (1, 0, 3)]]
    older = {k: v for k, v in end.items() if k != "taskOffsets"}
    assert tasks(older) == [[(0, 0, 5)], [(1, 0, 3)]]
