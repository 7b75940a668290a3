"""jetkafka against Spark's own Kafka connector (spark-sql-kafka), on the same topics.

Each test reads (or writes) the same data with ``format("kafka")`` and ``format("jetkafka")``
and the same options, and compares the rows on Spark's columns (key, value, topic, partition,
offset, timestamp, timestampType, headers) as sorted lists: a plain jetkafka read must give
exactly Spark's rows, none blanked, none added (jetkafka's own columns are left out).

Differences on purpose, pinned so both sides agree:

- isolation level: jetkafka reads ``read_committed`` by default, Spark ``read_uncommitted``.
  Every read here sets ``kafka.isolation.level=read_uncommitted`` (Spark's default, so Spark's
  side runs as users run it).
- ``subscribePattern``: a Python regular expression in jetkafka, a Java one in Spark, both
  matched against the whole topic name; the pattern used is valid and means the same in both.

The shared Spark session loads spark-sql-kafka for this module (the ``spark_kafka`` marker,
tests/conftest.py): a few jars on the one JVM cost nothing measurable, where a driver script
for Spark's side would start a second JVM (10-20 s on a busy 2-core machine) per run.
"""

from __future__ import annotations

import itertools
import json
import random
import uuid
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark_jetkafka import DefaultSource

from tests.integration.scripts.jetkafka_common import BASE_TS, numbered, produce
from tests.integration.scripts.sink_kafka_read import read_topic

pytestmark = [pytest.mark.integration, pytest.mark.spark_kafka]

FORMATS = ("kafka", "jetkafka")
SPARK_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
# jetkafka reads read_committed by default, Spark read_uncommitted: pinned to Spark's.
PINNED = {"kafka.isolation.level": "read_uncommitted"}
Rows = list[tuple]


@pytest.fixture(scope="module")
def sk(spark):
    """The shared session with jetkafka registered (Spark's ``kafka`` comes with the session)."""
    spark.dataSource.register(DefaultSource)
    return spark


@pytest.fixture
def named_topics(kafka_bootstrap: str) -> Iterator[Callable[[list[str], int], None]]:
    """Factory: create topics with the given names (for subscribePattern); deleted afterwards."""
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    created: list[str] = []

    def make(names: list[str], partitions: int = 1) -> None:
        futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names], operation_timeout=30)
        for name, fut in futures.items():
            fut.result(timeout=30)
            created.append(name)

    yield make
    if created:
        for fut in admin.delete_topics(created, operation_timeout=30).values():
            fut.result(timeout=30)


# -- reading and comparing ----------------------------------------------------------------------

def _columns(options: dict[str, str]) -> list[str]:
    return SPARK_COLUMNS + (["headers"] if options.get("includeHeaders") == "true" else [])


def _norm(row) -> tuple:
    """A row as a plain tuple: bytes for binary, headers as ((key, value), ...)."""
    out = []
    for name in row.__fields__:
        v = row[name]
        if isinstance(v, bytearray):
            v = bytes(v)
        elif name == "headers" and v is not None:
            v = tuple((h.key, None if h.value is None else bytes(h.value)) for h in v)
        out.append(v)
    return tuple(out)


def _sorted(rows: Rows) -> Rows:
    return sorted(rows, key=repr)  # repr: rows with nulls (a stub, a heartbeat) sort too


def _options(bootstrap: str, **options) -> dict[str, str]:
    return {"kafka.bootstrap.servers": bootstrap, **PINNED, **{k: str(v) for k, v in options.items()}}


def read_batch(spark, fmt: str, options: dict[str, str]) -> Rows:
    df = spark.read.format(fmt).options(**options).load().select(*_columns(options))
    return _sorted([_norm(r) for r in df.collect()])


def read_stream(spark, fmt: str, options: dict[str, str], checkpoint) -> list[Rows]:
    """Run a stream to the end (Trigger.AvailableNow): the rows of each micro-batch, in order."""
    batches: dict[int, Rows] = {}

    def collect(batch, batch_id: int) -> None:
        batches[batch_id] = _sorted([_norm(r) for r in batch.collect()])

    df = spark.readStream.format(fmt).options(**options).load().select(*_columns(options))
    query = (df.writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None
    return [batches[i] for i in sorted(batches)]


def _short(row: tuple) -> tuple:
    """A row for a message: long byte strings shortened."""
    return tuple(f"<{len(v)} bytes {v[:12]!r}...>" if isinstance(v, bytes) and len(v) > 40 else v
                 for v in row)


def assert_same_rows(spark_rows: Rows, jet_rows: Rows, what: str) -> None:
    """jetkafka's rows are Spark's, as a multiset; else name the rows missing and extra."""
    if spark_rows == jet_rows:
        return
    missing = list((Counter(spark_rows) - Counter(jet_rows)).elements())
    extra = list((Counter(jet_rows) - Counter(spark_rows)).elements())
    pytest.fail(f"{what}: jetkafka's rows differ from Spark's ({len(spark_rows)} rows by Spark, "
                f"{len(jet_rows)} by jetkafka); {len(missing)} missing in jetkafka, first: "
                f"{[_short(r) for r in _sorted(missing)[:5]]}; {len(extra)} extra in jetkafka, first: "
                f"{[_short(r) for r in _sorted(extra)[:5]]}", pytrace=False)


def compare_batch(spark, options: dict[str, str], what: str) -> Rows:
    """Both formats read ``options`` as a batch; jetkafka's rows must be Spark's. Spark's rows."""
    want, got = (read_batch(spark, fmt, options) for fmt in FORMATS)
    assert_same_rows(want, got, f"batch read, {what}")
    return want


def compare_stream(spark, options: dict[str, str], tmp_path, what: str, *, per_batch: bool = False
                   ) -> Rows:
    """Both formats stream ``options`` to the end; same rows (and, with ``per_batch``, the same
    rows in each non-empty micro-batch). Spark's rows."""
    runs = {fmt: read_stream(spark, fmt, options, tmp_path / f"ck-{fmt}-{uuid.uuid4().hex[:6]}")
            for fmt in FORMATS}
    flat = {fmt: _sorted([r for b in batches for r in b]) for fmt, batches in runs.items()}
    assert_same_rows(flat["kafka"], flat["jetkafka"], f"stream, {what}")
    if per_batch:  # micro-batches without rows are left out: they hold no row to compare
        split = {fmt: [b for b in batches if b] for fmt, batches in runs.items()}
        sizes = {fmt: [len(b) for b in batches] for fmt, batches in split.items()}
        assert sizes["jetkafka"] == sizes["kafka"], f"{what}: rows per micro-batch {sizes}"
        for i, (want, got) in enumerate(zip(split["kafka"], split["jetkafka"], strict=True)):
            assert_same_rows(want, got, f"stream, {what}, micro-batch {i} with rows")
    return flat["kafka"]


# -- sources ----------------------------------------------------------------------------------

def test_subscribe_payloads_null_keys_empty_and_large_values(sk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(2)
    large = random.Random(7).randbytes(900_000)  # near the 1 MB record limit of broker and producer
    records = [
        (0, None, b"null key", BASE_TS),
        (0, b"", b"empty key", BASE_TS + 1),
        (0, b"k-empty-value", b"", BASE_TS + 2),
        (0, b"k-null-value", None, BASE_TS + 3),  # a tombstone
        (1, None, None, BASE_TS + 4),
        (1, b"k-large", large, BASE_TS + 5),
        (1, "ключ".encode(), b"\x00\xff binary", BASE_TS + 6, [("h", None), ("h", b"2"), ("a", b"")]),
        *numbered(0, 4, 10), *numbered(1, 3, 10, ts0=BASE_TS + 500),
    ]
    produce(kafka_bootstrap, topic, records)
    options = _options(kafka_bootstrap, subscribe=topic, startingOffsets="earliest", includeHeaders="true")
    rows = compare_batch(sk, options, "subscribe")
    assert len(rows) == len(records)  # Spark's side read them all: the comparison means something
    assert (None, None) in {(r[0], r[1]) for r in rows} and large in {r[1] for r in rows}
    compare_stream(sk, options, tmp_path, "subscribe")


def test_headers_null_values_repeated_keys_and_order(sk, kafka_bootstrap, kafka_topic):
    topic = kafka_topic(1)
    produce(kafka_bootstrap, topic, [
        (0, b"k1", b"v1", BASE_TS, [("h1", b"a"), ("h2", None), ("h1", b"b"), ("h0", b"")]),
        (0, b"k2", b"v2", BASE_TS + 1, [("z", b"1"), ("a", b"2"), ("z", b"3")]),
        (0, b"k3", b"v3", BASE_TS + 2, None),
        (0, None, None, BASE_TS + 3, [("only", None)]),
        (0, b"k5", b"v5", BASE_TS + 4, [("ü-name", b"wert")]),
    ])
    options = _options(kafka_bootstrap, subscribe=topic, startingOffsets="earliest", includeHeaders="true")
    rows = compare_batch(sk, options, "includeHeaders")
    by_key = {r[0]: r[-1] for r in rows}
    assert by_key[b"k1"] == (("h1", b"a"), ("h2", None), ("h1", b"b"), ("h0", b"")) and len(rows) == 5


def test_assign_with_json_starting_and_ending_offsets(sk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(3)
    produce(kafka_bootstrap, topic, numbered(0, 0, 12) + numbered(1, 0, 12) + numbered(2, 0, 12))
    assign = json.dumps({topic: [0, 2]})
    batch = _options(kafka_bootstrap, assign=assign,
                     startingOffsets=json.dumps({topic: {"0": 3, "2": -2}}),
                     endingOffsets=json.dumps({topic: {"0": 8, "2": -1}}))
    rows = compare_batch(sk, batch, "assign with JSON offsets")
    assert sorted((r[3], r[4]) for r in rows) == [(0, i) for i in range(3, 8)] + [(2, i) for i in range(12)]
    compare_stream(sk, _options(kafka_bootstrap, assign=assign,
                                startingOffsets=json.dumps({topic: {"0": 5, "2": -2}})),
                   tmp_path, "assign with JSON startingOffsets")


@pytest.mark.parametrize("anchored", [True, False], ids=["anchored", "unanchored"])
def test_subscribe_pattern(sk, kafka_bootstrap, named_topics, anchored):
    """jetkafka: a Python regex; Spark: a Java regex. The pattern means the same in both dialects.
    Spark 4.2's default (admin) offset reader searches the pattern in each topic name
    (Scala's ``Regex.findFirstIn``), it does not match it in full: ``x_[ab]`` also takes ``x_ab``.
    Anchored with ``^…$``, both take ``x_a`` and ``x_b`` only."""
    prefix = f"jetpat_{uuid.uuid4().hex[:8]}"
    names = {suffix: f"{prefix}_{suffix}" for suffix in ("a", "b", "ab", "c")}
    named_topics(list(names.values()), 2)
    for i, (suffix, topic) in enumerate(names.items()):
        produce(kafka_bootstrap, topic, numbered(0, 0, 4, tag=suffix)
                + numbered(1, 0, 3, tag=suffix, ts0=BASE_TS + 100 * i))
    pattern = f"^{prefix}_[ab]$" if anchored else f"{prefix}_[ab]"
    options = _options(kafka_bootstrap, subscribePattern=pattern, startingOffsets="earliest")
    rows = compare_batch(sk, options, f"subscribePattern {pattern}")
    taken = {names[s] for s in (("a", "b") if anchored else ("a", "b", "ab"))}
    assert {r[2] for r in rows} == taken and len(rows) == 7 * len(taken)


@pytest.mark.parametrize("case", ["byTimestamp JSON", "global timestamps", "strategy latest"])
def test_timestamp_options(sk, kafka_bootstrap, kafka_topic, case):
    topic = kafka_topic(2)
    # partition 0: t = 0, 1, ... 9 s; partition 1: t = 4.5, 5.5, ... 13.5 s (after BASE_TS)
    produce(kafka_bootstrap, topic, numbered(0, 0, 10) + numbered(1, 0, 10, ts0=BASE_TS + 4_500))
    if case == "byTimestamp JSON":
        options = _options(
            kafka_bootstrap, subscribe=topic,
            startingOffsetsByTimestamp=json.dumps({topic: {"0": BASE_TS + 2_000, "1": BASE_TS + 6_000}}),
            endingOffsetsByTimestamp=json.dumps({topic: {"0": BASE_TS + 7_500, "1": BASE_TS + 60_000}}))
        want = [(0, i) for i in range(2, 8)] + [(1, i) for i in range(2, 10)]
    elif case == "global timestamps":
        options = _options(kafka_bootstrap, subscribe=topic, startingTimestamp=BASE_TS + 5_000,
                           endingTimestamp=BASE_TS + 9_000)
        want = [(0, i) for i in range(5, 9)] + [(1, i) for i in range(1, 5)]
    else:  # no record at or after the time in partition 0: "latest" starts it at its end
        options = _options(kafka_bootstrap, subscribe=topic, startingTimestamp=BASE_TS + 11_000,
                           startingOffsetsByTimestampStrategy="latest")
        want = [(1, i) for i in range(7, 10)]
    rows = compare_batch(sk, options, case)
    assert sorted((r[3], r[4]) for r in rows) == want


def test_starting_timestamp_stream(sk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(2)
    produce(kafka_bootstrap, topic, numbered(0, 0, 10) + numbered(1, 0, 10, ts0=BASE_TS + 4_500))
    options = _options(kafka_bootstrap, subscribe=topic, startingTimestamp=BASE_TS + 5_000)
    rows = compare_stream(sk, options, tmp_path, "startingTimestamp")
    want = [(0, i) for i in range(5, 10)] + [(1, i) for i in range(1, 10)]
    assert sorted((r[3], r[4]) for r in rows) == want


def test_log_append_time_topic(sk, kafka_bootstrap, kafka_topic):
    topic = kafka_topic(2, message_timestamp_type="LogAppendTime")
    produce(kafka_bootstrap, topic, numbered(0, 0, 8) + numbered(1, 0, 8))  # create times: replaced
    options = _options(kafka_bootstrap, subscribe=topic, startingOffsets="earliest")
    rows = compare_batch(sk, options, "LogAppendTime topic")
    assert {r[6] for r in rows} == {1} and len(rows) == 16


def test_max_offsets_per_trigger_stream(sk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(3)
    produce(kafka_bootstrap, topic, numbered(0, 0, 50) + numbered(1, 0, 30, ts0=BASE_TS + 300)
            + numbered(2, 0, 7, ts0=BASE_TS + 700))
    options = _options(kafka_bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger=20)
    rows = compare_stream(sk, options, tmp_path, "maxOffsetsPerTrigger=20", per_batch=True)
    assert len(rows) == 87


def test_out_of_order_timestamps_are_all_delivered(sk, kafka_bootstrap, kafka_topic, tmp_path):
    """Timestamps jittered backwards within a partition (as batching producers write them):
    every record arrives with its payload, in a batch read and in a stream split by a limit."""
    topic = kafka_topic(2)
    rng = random.Random(32)
    records = [(p, f"k{p}-{i}".encode(), f"v{p}-{i}".encode(), BASE_TS + i * 100 - rng.randint(50, 450))
               for p in (0, 1) for i in range(150)]
    assert any(b[3] < a[3] for a, b in itertools.pairwise(records) if a[0] == b[0])
    produce(kafka_bootstrap, topic, records)
    options = _options(kafka_bootstrap, subscribe=topic, startingOffsets="earliest")
    rows = compare_batch(sk, options, "out-of-order timestamps")
    assert sorted((r[0], r[1]) for r in rows) == sorted((k, v) for _, k, v, _ in records)
    compare_stream(sk, {**options, "maxOffsetsPerTrigger": "60"}, tmp_path, "out-of-order timestamps",
                   per_batch=True)


def test_transactional_gaps_give_no_rows(sk, kafka_bootstrap, kafka_topic, tmp_path):
    """Commit markers and aborted records are offsets without rows, in a batch read and in a
    stream whose limit makes one micro-batch hold gaps only."""
    topic = kafka_topic(1)
    tid = f"parity-{uuid.uuid4().hex[:6]}"
    produce(kafka_bootstrap, topic, numbered(0, 0, 4, tag="c"), transactional_id=tid)  # 0-3, marker 4
    produce(kafka_bootstrap, topic, numbered(0, 4, 3, tag="a"), transactional_id=tid, abort=True)  # 5-7, 8
    produce(kafka_bootstrap, topic, numbered(0, 7, 2, tag="c"), transactional_id=tid)  # 9-10, marker 11
    # read_committed is jetkafka's default; Spark's is read_uncommitted: pinned for both
    options = _options(kafka_bootstrap, subscribe=topic, startingOffsets="earliest",
                       **{"kafka.isolation.level": "read_committed"})
    rows = compare_batch(sk, options, "transactional topic, read_committed")
    assert sorted(r[4] for r in rows) == [0, 1, 2, 3, 9, 10]
    compare_stream(sk, {**options, "maxOffsetsPerTrigger": "4"}, tmp_path,
                   "transactional topic, read_committed, maxOffsetsPerTrigger=4", per_batch=True)


def _delete_before(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_records([TopicPartition(topic, partition, offset)]).values():
        fut.result(30)


def test_fail_on_data_loss_false_after_deleted_records(sk, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(2)
    produce(kafka_bootstrap, topic, numbered(0, 0, 10) + numbered(1, 0, 10))
    options = _options(kafka_bootstrap, subscribe=topic, startingOffsets="earliest", failOnDataLoss="false")
    checkpoints = {fmt: tmp_path / f"ck-{fmt}" for fmt in FORMATS}
    first = {fmt: read_stream(sk, fmt, options, checkpoints[fmt]) for fmt in FORMATS}
    assert_same_rows(*(_sorted([r for b in first[fmt] for r in b]) for fmt in FORMATS), "before the loss")
    produce(kafka_bootstrap, topic, numbered(0, 10, 10) + numbered(1, 10, 5))
    _delete_before(kafka_bootstrap, topic, 0, 15)  # offsets 10..14 of partition 0 are never read
    after = {fmt: _sorted([r for b in read_stream(sk, fmt, options, checkpoints[fmt]) for r in b])
             for fmt in FORMATS}
    assert_same_rows(after["kafka"], after["jetkafka"], "stream restarted after deleted records")
    assert sorted((r[3], r[4]) for r in after["kafka"]) == \
        [(0, i) for i in range(15, 20)] + [(1, i) for i in range(10, 15)]
    # a batch read from JSON offsets below the log start
    batch = _options(kafka_bootstrap, subscribe=topic, failOnDataLoss="false",
                     startingOffsets=json.dumps({topic: {"0": 5, "1": 12}}))
    rows = compare_batch(sk, batch, "JSON startingOffsets below the log start, failOnDataLoss=false")
    assert sorted((r[3], r[4]) for r in rows) == [(0, i) for i in range(15, 20)] + [(1, 12), (1, 13), (1, 14)]


# -- sink -------------------------------------------------------------------------------------

SINK_SCHEMA = "key binary, value binary, headers array<struct<key:string,value:binary>>"


def _write_both(spark, bootstrap: str, topics: dict[str, str], rows: list[tuple], schema: str) -> None:
    df = spark.createDataFrame(rows, schema)
    for fmt, topic in topics.items():
        df.write.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("topic", topic) \
            .mode("append").save()


def _headers(h) -> tuple:
    return tuple(h or ())


def test_sink_places_keys_as_sparks_sink(sk, kafka_bootstrap, kafka_topic):
    """No partition column: a keyed record goes where Spark's sink (Java client, murmur2) puts it."""
    topics = {fmt: kafka_topic(6) for fmt in FORMATS}
    keyed = [(f"key-{i}".encode(), f"v{i}".encode(), None) for i in range(200)]
    nulls = [(None, f"n{i}".encode(), [("h", b"x"), ("h", None)]) for i in range(20)]
    _write_both(sk, kafka_bootstrap, topics, keyed + nulls, SINK_SCHEMA)
    back = {fmt: read_topic(kafka_bootstrap, topic) for fmt, topic in topics.items()}
    placed = {fmt: {k: p for k, _, p, _ in recs if k is not None} for fmt, recs in back.items()}
    assert len(placed["kafka"]) == 200 and len(set(placed["kafka"].values())) == 6
    moved = {k: (p, placed["jetkafka"].get(k)) for k, p in placed["kafka"].items()
             if placed["jetkafka"].get(k) != p}
    assert not moved, (f"{len(moved)} of 200 keys land in another partition than with Spark's sink "
                       f"(Spark's, jetkafka's), first: {dict(list(moved.items())[:5])}")
    # Null keys: Spark's sink (the Java client's sticky partitioner) spreads them by batch, not
    # by record, so their partitions are not compared; each record arrives once, headers intact.
    written = {fmt: Counter((k, v, _headers(h)) for k, v, _, h in recs) for fmt, recs in back.items()}
    assert written["jetkafka"] == written["kafka"]


def test_sink_with_partition_column(sk, kafka_bootstrap, kafka_topic):
    topics = {fmt: kafka_topic(6) for fmt in FORMATS}
    rows = [(None if i % 10 == 0 else f"key-{i}".encode(), f"v{i}".encode(), (i * 7) % 6,
             [("n", str(i).encode()), ("n", None)] if i % 3 == 0 else None) for i in range(120)]
    _write_both(sk, kafka_bootstrap, topics, rows, SINK_SCHEMA.replace("headers", "partition int, headers"))
    back = {fmt: Counter((k, v, p, _headers(h)) for k, v, p, h in read_topic(kafka_bootstrap, topic))
            for fmt, topic in topics.items()}
    assert sum(back["kafka"].values()) == 120
    assert back["jetkafka"] == back["kafka"]


# -- schema -----------------------------------------------------------------------------------

@pytest.mark.parametrize("headers", [False, True], ids=["plain", "includeHeaders"])
def test_plain_read_schema_is_sparks(sk, kafka_bootstrap, kafka_topic, tmp_path, headers):
    """A read that asks for no event time has exactly Spark's columns, names and types, batch
    and stream (a job writing the raw frame into a schema-enforced table gains none); any
    ``watermark.*`` or ``eventTime.*`` option brings ``watermark``, ``heartbeat`` and ``late``."""
    topic = kafka_topic(1)
    records = numbered(0, 3, 10)
    produce(kafka_bootstrap, topic, records)
    options = _options(kafka_bootstrap, subscribe=topic, startingOffsets="earliest",
                       includeHeaders=str(headers).lower())
    spark_side = sk.read.format("kafka").options(**options).load().schema
    assert sk.read.format("jetkafka").options(**options).load().schema == spark_side
    assert sk.readStream.format("jetkafka").options(**options).load().schema == spark_side
    assert sk.readStream.format("kafka").options(**options).load().schema == spark_side
    assert len(read_batch(sk, "jetkafka", options)) == len(records)  # the rows follow the schema
    asked = sk.readStream.format("jetkafka").options(**options, **{"watermark.lag": "1 second"}).load()
    assert asked.columns == [*spark_side.fieldNames(), "watermark", "heartbeat", "late"]
