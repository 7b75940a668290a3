"""jetkafka options, offsets JSON and planning helpers (pure logic)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from pyspark.sql.datasource import DataSource

from jetspark.datasources.kafka.offsets import KafkaOffset
from jetspark.datasources.kafka.options import EARLIEST, LATEST, KafkaSourceOptions
from jetspark.datasources.kafka.read import RangeSpec
from jetspark.datasources.kafka.source import prorate, split_ranges
from jetspark.datasources.watermarks import PartitionMark, TrackerState
from jetspark.errors import OptionError

BASE = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}


def parse(streaming=True, **extra):
    return KafkaSourceOptions.parse({**BASE, **extra}, streaming=streaming)


def test_defaults_like_sparks_kafka_source():
    o = parse()
    assert o.subscription.topics == ("t",)
    assert o.starting.default == LATEST and parse(streaming=False).starting.default == EARLIEST
    assert o.fail_on_data_loss and not o.include_headers and o.max_offsets_per_trigger is None
    assert o.watermark.lag_ms == 0 and o.watermark.idle_timeout_ms == 60_000
    # a plain read has Spark's rows: late records kept, no heartbeat rows
    assert o.keep_late and not o.heartbeats
    assert o.kafka["bootstrap.servers"] == "h:1" and o.kafka["group.id"].startswith("jetkafka-")
    assert o.isolation_committed


@pytest.mark.parametrize("extra", [{"watermark.lag": "2 seconds"}, {"watermark.idleTimeout": "5s"},
                                   {"watermark.maxTimestampFrom": "scan"}, {"WATERMARK.LATERECORDS": "drop"}])
def test_heartbeats_on_when_the_query_asks_for_event_time(extra):
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    assert KafkaSourceOptions.parse({**base, **extra}, streaming=True).heartbeats
    off = KafkaSourceOptions.parse({**base, **extra, "watermark.heartbeats": "false"}, streaming=True)
    assert not off.heartbeats


def test_options_are_case_insensitive_and_kafka_keys_keep_their_spelling():
    o = KafkaSourceOptions.parse({"KAFKA.bootstrap.servers": "h:1", "SUBSCRIBE": "a,b",
                                  "maxoffsetspertrigger": "7", "Watermark.Lag": "2 minutes",
                                  "kafka.isolation.level": "read_uncommitted"}, streaming=True)
    assert o.subscription.topics == ("a", "b") and o.max_offsets_per_trigger == 7
    assert o.watermark.lag_ms == 120_000 and not o.isolation_committed


def test_offsets_json_and_timestamps():
    o = parse(startingOffsets='{"t":{"0":23,"1":-2}}')
    assert o.starting.per_partition == {("t", 0): 23, ("t", 1): -2}
    o = parse(startingOffsetsByTimestamp='{"t":{"0":1000}}')
    assert o.starting.by_timestamp and o.starting.per_partition == {("t", 0): 1000}
    assert parse(startingTimestamp="5").starting.timestamp == 5
    o = KafkaSourceOptions.parse({"kafka.bootstrap.servers": "h:1", "assign": '{"x":[1,0]}'}, streaming=True)
    assert o.subscription.assigned == (("x", 0), ("x", 1))


@pytest.mark.parametrize(
    ("extra", "option"),
    [
        ({"subscribePattern": "t.*"}, "subscribe | subscribePattern | assign"),
        ({"maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
        ({"maxOffsetsPerTrigger": "ten"}, "maxOffsetsPerTrigger"),
        ({"startingOffsets": "yesterday"}, "startingOffsets"),
        ({"startingOffsets": '{"t":{"0":-7}}'}, "startingOffsets"),
        ({"failOnDataLoss": "maybe"}, "failOnDataLoss"),
        ({"watermark.lag": "soon"}, "watermark.lag"),
        ({"watermark.lateRecords": "hide"}, "watermark.lateRecords"),
        ({"watermark.maxFutureSkew": "a while"}, "watermark.maxFutureSkew"),
        ({"eventTime.onMalformed": "null"}, "eventTime.onMalformed"),  # no field, no cut-off
        ({"watermark.maxFutureSkew": "1h", "eventTime.onMalformed": "skip"}, "eventTime.onMalformed"),
        ({"endingOffsets": "latest"}, "endingOffsets"),
        ({"kafka.enable.auto.commit": "true"}, "kafka.enable.auto.commit"),
        ({"maxOffsetPerTrigger": "5"}, "maxOffsetPerTrigger"),
        ({"minOffsetsPerTrigger": "9", "maxOffsetsPerTrigger": "5"}, "minOffsetsPerTrigger"),
        ({"startingOffsetsByTimestamp": "[1]"}, "startingOffsetsByTimestamp"),
    ],
)
def test_bad_options_name_option_value_and_accepted(extra, option):
    with pytest.raises(OptionError) as err:
        parse(**extra)
    assert err.value.option == option
    assert "accepted" in str(err.value)


def test_required_and_batch_only_rules():
    with pytest.raises(OptionError, match=r"kafka\.bootstrap\.servers"):
        KafkaSourceOptions.parse({"subscribe": "t"}, streaming=True)
    with pytest.raises(OptionError, match="startingOffsets"):
        parse(streaming=False, startingOffsets="latest")
    with pytest.raises(OptionError, match="endingOffsets"):
        parse(streaming=False, endingOffsets="earliest")
    assert parse(streaming=False, endingOffsets='{"t":{"0":5}}').ending.per_partition == {("t", 0): 5}


def test_offset_json_round_trip_keeps_tracker_state():
    state = TrackerState({"t:0": PartitionMark(100, 7, False), "t:1": PartitionMark(None, 8, True)}, 95)
    off = KafkaOffset({("t", 0): 12, ("t", 1): 3}, state, {("t", 1): 0})
    data = off.to_json(lag_ms=5)
    assert data["offsets"] == {"t": {"0": 12, "1": 3}} and data["watermark"] == 95
    assert data["partitions"]["t"]["0"] == {"maxTs": 100, "wm": 95, "idle": False, "progressMs": 7}
    back = KafkaOffset.from_json(data)
    assert back == off
    prev = KafkaOffset({("t", 0): 10, ("t", 1): 99})
    assert back.start_of(("t", 0), prev) == 10 and back.start_of(("t", 1), prev) == 0


def test_max_future_skew_and_its_policy_for_kafka_timestamps():
    default = parse()
    assert default.max_future_skew_ms is None and default.on_malformed == "fail"
    skewed = parse(**{"watermark.maxFutureSkew": "10 minutes", "eventTime.onMalformed": "NULL"})
    assert (skewed.max_future_skew_ms, skewed.on_malformed, skewed.event_time) == (600_000, "null", None)
    with pytest.raises(OptionError) as err:
        parse(**{"watermark.maxFutureSkew": "-1s"})
    assert (err.value.option, err.value.value) == ("watermark.maxFutureSkew", "-1s")
    assert "a duration such as" in err.value.accepted


def test_offset_json_keeps_the_future_cut_off_and_reads_offsets_without_it():
    off = KafkaOffset({("t", 0): 12}, TrackerState({"t:0": PartitionMark(100, 7, False)}, 100),
                      future_cutoff=1_700_000_600_000)
    data = off.to_json(lag_ms=0)
    assert data["futureCutoff"] == 1_700_000_600_000
    assert KafkaOffset.from_json(data) == off
    del data["futureCutoff"]  # an offset written before the option, or without it
    assert KafkaOffset.from_json(data).future_cutoff is None
    assert "futureCutoff" not in KafkaOffset({("t", 0): 12}).to_json(lag_ms=0)


def test_prorate_like_spark():
    assert prorate({"a": 10, "b": 30}, 100) == {"a": 10, "b": 30}
    assert prorate({"a": 10, "b": 30}, 20) == {"a": 5, "b": 15}
    assert prorate({"a": 1, "b": 999, "c": 0}, 10) == {"a": 1, "b": 9, "c": 0}


def test_split_ranges_for_min_partitions_covers_every_offset_once():
    ranges = [RangeSpec("t", 0, 0, 100, None, None, None), RangeSpec("t", 1, 50, 60, None, None, None)]
    pieces = split_ranges(ranges, 6)
    assert len(pieces) >= 6
    covered = sorted((p.partition, o) for p in pieces for o in range(p.start, p.end))
    assert covered == sorted([(0, o) for o in range(100)] + [(1, o) for o in range(50, 60)])
    assert split_ranges(ranges, None) == ranges


def test_split_ranges_divides_as_sparks_kafka_source():
    """Spark's KafkaOffsetRangeCalculator: a range of n offsets in k pieces gives each the
    offsets left over the pieces left, rounded down (18 in 5: 3, 3, 4, 4, 4), and a partition's
    share of minPartitions is rounded half up (2.5 pieces: 3)."""
    ranges = [RangeSpec("t", 0, 0, 18, None, None, None), RangeSpec("t", 1, 0, 6, None, None, None),
              RangeSpec("t", 2, 0, 1, None, None, None)]
    pieces = split_ranges(ranges, 7)
    assert [(p.partition, p.start, p.end) for p in pieces] == [
        (0, 0, 3), (0, 3, 6), (0, 6, 10), (0, 10, 14), (0, 14, 18), (1, 0, 3), (1, 3, 6), (2, 0, 1)]
    halves = [RangeSpec("t", 0, 0, 5, None, None, None), RangeSpec("t", 1, 0, 5, None, None, None)]
    assert len(split_ranges(halves, 5)) == 6  # 2.5 pieces each: 3 and 3, not banker's 2 and 2


def test_split_ranges_for_max_records_per_partition_then_min_partitions():
    ranges = [RangeSpec("t", 0, 0, 100, None, None, None), RangeSpec("t", 1, 50, 60, None, None, None)]
    pieces = split_ranges(ranges, None, 30)
    assert [(p.partition, p.start, p.end) for p in pieces] == [
        (0, 0, 25), (0, 25, 50), (0, 50, 75), (0, 75, 100), (1, 50, 60)]
    assert 9 <= len(split_ranges(ranges, 10, 30)) <= 11  # 5 pieces are too few: about minPartitions
    assert max(p.end - p.start for p in split_ranges(ranges, 2, 30)) <= 30
    assert parse(maxRecordsPerPartition="30").max_records_per_partition == 30
    with pytest.raises(OptionError):
        parse(maxRecordsPerPartition="0")


def test_format_module_exposes_default_source():
    # Loaded from its file: it is only importable by name once pyproject lists it.
    path = Path(__file__).resolve().parents[4] / "formats" / "pyspark_jetkafka.py"
    spec = importlib.util.spec_from_file_location("pyspark_jetkafka", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert issubclass(module.DefaultSource, DataSource)
    assert module.DefaultSource.name() == "jetkafka"


def test_a_kafka_setting_librdkafka_rejects_is_named():
    from jetspark.datasources.kafka.broker import validate_consumer_conf

    with pytest.raises(OptionError) as err:
        validate_consumer_conf({"bootstrap.servers": "127.0.0.1:9", "group.id": "g",
                                "sasl.jaas.config": "org.apache...required;"})
    assert err.value.option == "kafka.sasl.jaas.config"
    with pytest.raises(OptionError) as err:
        validate_consumer_conf({"bootstrap.servers": "127.0.0.1:9", "group.id": "g",
                                "fetch.max.bytes": "lots"})
    assert err.value.option == "kafka.fetch.max.bytes" and err.value.value == "lots"


def test_commit_offsets_to_group_needs_a_group_id_and_a_stream():
    assert not parse().commit_offsets_to_group
    assert parse(**{"kafka.group.id": "lag", "commitOffsetsToGroup": "true"}).commit_offsets_to_group
    with pytest.raises(OptionError) as err:
        parse(commitOffsetsToGroup="true")
    assert err.value.option == "commitOffsetsToGroup" and "kafka.group.id" in str(err.value)
    with pytest.raises(OptionError, match="streaming queries only"):
        parse(streaming=False, **{"kafka.group.id": "lag", "commitOffsetsToGroup": "true"})
    assert not parse(streaming=False, commitOffsetsToGroup="false").commit_offsets_to_group


class _FlakyAdmin:
    """list_offsets fails ``failures`` times, then answers offset 7 for every partition."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def poll(self, timeout: float) -> int:  # serves error callbacks: none here
        return 0

    def list_offsets(self, request, **_):
        from concurrent.futures import Future
        from types import SimpleNamespace

        from confluent_kafka import KafkaException

        self.calls += 1
        if self.calls <= self.failures:
            raise KafkaException("broker not available")
        out = {}
        for ktp in request:
            fut: Future = Future()
            fut.set_result(SimpleNamespace(offset=7, timestamp=-1))
            out[ktp] = fut
        return out


@pytest.mark.parametrize(("retries", "failures", "ok"), [("3", 3, True), ("1", 2, False), ("0", 0, True)])
def test_fetch_offset_retries_like_sparks_option(retries, failures, ok):
    from jetspark.datasources.kafka.broker import KafkaBroker, KafkaError

    options = parse(**{"fetchOffset.numRetries": retries, "fetchOffset.retryIntervalMs": "0"})
    assert parse().fetch_offset_retries == 3 and parse().fetch_offset_retry_interval_ms == 10
    broker = KafkaBroker(options)
    broker._admin = admin = _FlakyAdmin(failures)
    if ok:
        assert broker.latest([("t", 0)]) == {("t", 0): 7}
    else:
        with pytest.raises(KafkaError, match="2 attempts"):
            broker.latest([("t", 0)])
    assert admin.calls == min(failures, int(retries)) + 1
