"""The native (librdkafka → Arrow) reader yields the same batches as the confluent-kafka one.

Both readers read the same ranges of a real topic; their tables must be equal, column for
column (nulls, empty values, headers, late-record stubs, transactional gaps). The extension
needs only a C compiler at build time and runs on confluent-kafka's librdkafka, so it must be
built and in use, in Spark's Python workers too: a build that silently fell back to
confluent-kafka fails here.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import confluent_kafka
import pyarrow as pa
import pytest

from jetspark.datasources.kafka import native as kafka_native
from jetspark.datasources.kafka.consumers import reader_description, use_native
from jetspark.datasources.kafka.read import RangeSpec, ReadSettings, read_range
from tests.integration.scripts.jetkafka_common import BASE_TS, numbered, produce

pytestmark = pytest.mark.integration


def settings(bootstrap: str, **extra) -> ReadSettings:
    base = {"kafka": {"bootstrap.servers": bootstrap, "group.id": f"native-{uuid.uuid4().hex[:8]}"},
            "include_headers": False, "keep_late": True, "fail_on_data_loss": True,
            "poll_timeout_ms": 30_000, "chunk_rows": 7}
    base.update(extra)
    return ReadSettings(**base)


def both(s: ReadSettings, rng: RangeSpec, first: bool = False) -> tuple[pa.Table, pa.Table]:
    native = pa.Table.from_batches(list(read_range(s, rng, first=first, native=True)))
    confluent = pa.Table.from_batches(list(read_range(s, rng, first=first, native=False)))
    return native, confluent


def assert_same(native: pa.Table, confluent: pa.Table) -> None:
    assert native.schema == confluent.schema
    assert native.num_rows == confluent.num_rows
    for name in native.column_names:  # column by column: a failure names the column
        assert native[name].equals(confluent[name]), name


def test_the_extension_is_built_and_used():
    assert kafka_native.AVAILABLE, f"native Kafka reader not built: {kafka_native.IMPORT_ERROR}"
    assert use_native()
    assert reader_description().startswith("native (librdkafka ")


def test_the_extension_runs_on_confluent_kafkas_librdkafka():
    assert kafka_native._kafka_arrow.librdkafka_version() == confluent_kafka.libversion()[0]
    assert kafka_native._kafka_arrow.librdkafka_version_int() == confluent_kafka.libversion()[1]
    assert kafka_native.describe() == f"native (librdkafka {confluent_kafka.libversion()[0]})"


def test_one_librdkafka_in_a_process_that_uses_both_readers():
    """A fresh process that opened a native and a confluent-kafka consumer maps one librdkafka file."""
    code = """
from confluent_kafka import Consumer
from jetspark.datasources.kafka.native import NativeConsumer
conf = {"bootstrap.servers": "127.0.0.1:9", "group.id": "one-librdkafka"}
native, confluent = NativeConsumer(conf), Consumer(conf)
with open("/proc/self/maps") as maps:
    files = {line.split()[-1] for line in maps if "librdkafka" in line}
native.close()
confluent.close()
print("\\n".join(sorted(files)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=True)
    files = out.stdout.split()
    assert len(files) == 1, files
    assert files[0] == kafka_native._kafka_arrow.loaded_path()


def test_a_library_without_librdkafkas_functions_is_refused_by_name():
    """load() resolves every function it needs, or fails naming the first one missing."""
    code = """
from jetspark.datasources.kafka import _kafka_arrow
try:
    _kafka_arrow.load("libc.so.6")
except ImportError as e:
    print(e)
print(_kafka_arrow.loaded_path())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=True).stdout.splitlines()
    assert out == ["librdkafka at libc.so.6 lacks the function rd_kafka_version (too old a librdkafka?)",
                   "None"]


def test_spark_python_workers_use_the_native_reader(spark):
    """The worker imports the package like jetkafka's read tasks do (editable install included)."""

    def probe(_):
        from jetspark.datasources.kafka.consumers import use_native as worker_use_native

        yield worker_use_native()

    assert spark.sparkContext.parallelize([0, 1], 2).mapPartitions(probe).collect() == [True, True]


@pytest.fixture(scope="module")
def mixed_topic(kafka_bootstrap):
    """One partition: null keys, null and empty values, headers, and event times going back."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"jet_native_{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    records = []
    for i in range(40):
        key = None if i % 5 == 0 else f"k{i}".encode()
        value = None if i % 7 == 0 else (b"" if i % 3 == 0 else f"value-{i}".encode() * (i % 4 + 1))
        ts = BASE_TS + i * 1000 - (5_000 if i % 6 == 0 else 0)  # every 6th record 5 s "late"
        headers = [("h", f"x{i}".encode()), ("n", None)] if i % 2 else None
        records.append((0, key, value, ts, headers))
    produce(kafka_bootstrap, topic, records)
    yield topic
    admin.delete_topics([topic])


def test_a_read_task_does_not_import_pandas(kafka_bootstrap, mixed_topic):
    """A new Python worker that only reads pays no pandas import (about half a second): the
    batch is built from buffers. Late-record flags and watermarks included."""
    code = f"""
import sys
from jetspark.datasources.kafka.read import RangeSpec, ReadSettings, read_range
s = ReadSettings(kafka={{"bootstrap.servers": {kafka_bootstrap!r}, "group.id": "no-pandas"}},
                 include_headers=True, keep_late=True, fail_on_data_loss=True, poll_timeout_ms=30_000,
                 chunk_rows=7)
rng = RangeSpec({mixed_topic!r}, 0, 0, 40, start_max_ts=None, w_prev={BASE_TS + 3_000}, watermark={BASE_TS})
rows = sum(b.num_rows for b in read_range(s, rng, native=True))
print(rows, "pandas" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-2:] == ["40", "False"]


@pytest.mark.parametrize("include_headers", [False, True], ids=["plain", "headers"])
@pytest.mark.parametrize("keep_late", [True, False], ids=["keep-late", "drop-late"])
def test_same_batches_for_nulls_empty_values_headers_and_late_records(kafka_bootstrap, mixed_topic,
                                                                      include_headers, keep_late):
    s = settings(kafka_bootstrap, include_headers=include_headers, keep_late=keep_late)
    rng = RangeSpec(mixed_topic, 0, 0, 40, start_max_ts=None, w_prev=BASE_TS + 3_000, watermark=BASE_TS)
    native, confluent = both(s, rng)
    assert_same(native, confluent)
    assert native.num_rows == 40
    rows = native.to_pylist()
    assert not any(rows[i]["late"] for i in (9, 10, 14))
    assert rows[10]["key"] is None and rows[9]["key"] == b"k9"  # null key
    assert rows[14]["value"] is None and rows[9]["value"] == b""  # null vs empty value
    assert sum(native["late"].to_pylist()) > 0
    if include_headers:
        assert rows[9]["headers"] == [{"key": "h", "value": b"x9"}, {"key": "n", "value": None}]
        assert rows[10]["headers"] is None
    if not keep_late:  # dropped late records: payload-less heartbeat rows
        late = [r for r in rows if r["late"]]
        assert all(r["heartbeat"] and r["key"] is None and r["value"] is None for r in late)


def test_same_batches_for_a_range_ending_inside_the_topic(kafka_bootstrap, mixed_topic):
    s = settings(kafka_bootstrap, chunk_rows=4)
    rng = RangeSpec(mixed_topic, 0, 11, 23, start_max_ts=BASE_TS + 12_000, w_prev=None, watermark=None)
    native, confluent = both(s, rng)
    assert_same(native, confluent)
    assert native["offset"].to_pylist() == list(range(11, 23))


def test_same_batches_for_a_transactional_topic_with_an_aborted_transaction(kafka_bootstrap, kafka_topic):
    topic = kafka_topic(1)
    tid = f"native-{uuid.uuid4().hex[:6]}"
    # offsets 0-4 committed, 5 marker; 6-10 aborted, 11 marker; 12-16 committed, 17 marker
    produce(kafka_bootstrap, topic, numbered(0, 0, 5, tag="c"), transactional_id=tid)
    produce(kafka_bootstrap, topic, numbered(0, 5, 5, tag="a"), transactional_id=tid, abort=True)
    produce(kafka_bootstrap, topic, numbered(0, 10, 5, tag="c"), transactional_id=tid)
    s = settings(kafka_bootstrap, chunk_rows=3)
    for start, end, want in [(0, 18, [0, 1, 2, 3, 4, 12, 13, 14, 15, 16]), (3, 13, [3, 4, 12]),
                             (5, 12, [])]:
        rng = RangeSpec(topic, 0, start, end, start_max_ts=None, w_prev=None, watermark=BASE_TS)
        native, confluent = both(s, rng, first=True)
        assert_same(native, confluent)
        data = [o for o, hb in zip(native["offset"].to_pylist(), native["heartbeat"].to_pylist(), strict=True)
                if not hb]
        assert data == want
        if not want:  # only gaps: the heartbeat row carries the watermark
            assert native.num_rows == 1 and native["heartbeat"].to_pylist() == [True]
    uncommitted = settings(kafka_bootstrap, kafka={**s.kafka, "isolation.level": "read_uncommitted"})
    native, confluent = both(uncommitted, RangeSpec(topic, 0, 0, 18, None, None, None))
    assert_same(native, confluent)
    assert sum(k.startswith(b"a0-") for k in native["key"].to_pylist()) == 5


def test_settings_newer_than_debians_librdkafka_are_taken(kafka_bootstrap, mixed_topic):
    """fetch.queue.backoff.ms (librdkafka 2.4) was refused when the reader ran on Debian's 2.0.2."""
    s = settings(kafka_bootstrap)
    newer = settings(kafka_bootstrap, kafka={**s.kafka, "fetch.queue.backoff.ms": "0"})
    kafka_native.NativeConsumer(newer.kafka).close()
    rng = RangeSpec(mixed_topic, 0, 0, 40, None, None, None)
    got = pa.Table.from_batches(list(read_range(newer, rng, native=True)))
    assert_same(got, pa.Table.from_batches(list(read_range(s, rng, native=False))))


def test_an_unknown_setting_is_refused_by_name(kafka_bootstrap):
    s = settings(kafka_bootstrap)
    with pytest.raises(kafka_native.NativeConfigError, match=r"jetspark\.no\.such\.setting"):
        kafka_native.NativeConsumer({**s.kafka, "jetspark.no.such.setting": "1"})


def test_the_drivers_timestamp_scan_is_the_same_through_both_readers(kafka_bootstrap, kafka_topic):
    """The driver's max-timestamp scan of a transactional topic (markers, an aborted transaction
    with greater timestamps), natively and through confluent-kafka, by record timestamp and by
    a JSON event time."""
    from confluent_kafka import Consumer, TopicPartition

    from jetspark.datasources.kafka.event_time import EventTimeSpec
    from jetspark.datasources.kafka.scan import scan_max_timestamps

    topic = kafka_topic(2)
    tid = f"scan-{uuid.uuid4().hex[:6]}"

    def recs(partition: int, first: int, n: int, shift: int = 0) -> list[tuple]:
        return [(partition, None, f'{{"t": {BASE_TS + shift + i * 1000 + 123}}}'.encode(),
                 BASE_TS + shift + i * 1000) for i in range(first, first + n)]

    produce(kafka_bootstrap, topic, recs(0, 0, 5) + recs(1, 0, 3), transactional_id=tid)  # p0 0-4, p1 0-2
    produce(kafka_bootstrap, topic, recs(0, 0, 2, 10**6) + recs(1, 0, 2, 10**6), transactional_id=tid,
            abort=True)  # p0 6-7, p1 4-5: aborted, later timestamps
    produce(kafka_bootstrap, topic, recs(0, 5, 3), transactional_id=tid)  # p0 9-11
    probe = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "scan-probe"})
    ends = [probe.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in (0, 1)]
    probe.close()
    assert ends == [13, 7]
    ranges = {(topic, 0): (0, 13), (topic, 1): (0, 7)}
    kafka = {"bootstrap.servers": kafka_bootstrap, "group.id": f"scan-{uuid.uuid4().hex[:8]}"}
    want = {None: {(topic, 0): BASE_TS + 7_000, (topic, 1): BASE_TS + 2_000},
            "json": {(topic, 0): BASE_TS + 7_123, (topic, 1): BASE_TS + 2_123}}
    for kind, spec in [(None, None), ("json", EventTimeSpec(("t",)))]:
        for native in (True, False):
            got = scan_max_timestamps(kafka, ranges, fail_on_data_loss=True, poll_timeout_ms=30_000,
                                      event_time=spec, native=native)
            assert got == want[kind], (kind, native)
            part = scan_max_timestamps(kafka, {(topic, 0): (0, 3), (topic, 1): (3, 7)}, event_time=spec,
                                       fail_on_data_loss=True, poll_timeout_ms=30_000, native=native)
            first3 = BASE_TS + 2_000 + (123 if spec else 0)
            assert part == {(topic, 0): first3, (topic, 1): None}, (kind, native)  # p1 3-6: marker, aborted


def _queue_full_backoffs(bootstrap: str, topic: str, **extra: str) -> list[str]:
    """librdkafka's own account (debug log) of how long a consumer made by the readers'
    consumer_conf waits before fetching again once its prefetch queue is full."""
    import logging

    from confluent_kafka import Consumer, TopicPartition

    from jetspark.datasources.kafka.consumers import consumer_conf

    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logger = logging.getLogger(f"rdkafka-{uuid.uuid4().hex[:8]}")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    # queued.min.messages 10: the 300 records of one fetch fill the prefetch queue
    conf = consumer_conf({"bootstrap.servers": bootstrap, "group.id": f"soon-{uuid.uuid4().hex[:8]}",
                          "debug": "fetch", "queued.min.messages": "10", "logger": logger, **extra})
    consumer = Consumer(conf)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline, got = time.monotonic() + 60, 0
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():  # the partition's end (enable.partition.eof)
                break
            got += 1
        assert got == 300
    finally:
        consumer.close()
    return [line for line in lines if "Queue full" in line]


def test_consumers_fetch_again_soon(kafka_bootstrap, kafka_topic):
    """librdkafka ≥ 2.4 waits fetch.queue.backoff.ms (1 s by default) after its prefetch queue
    filled before it fetches again: the readers' consumers wait 10 ms (librdkafka says so in its
    fetch log), and a user's setting wins. fetch.wait.max.ms (how long the broker holds a fetch
    at the log's end) is asked 10 ms the same way; librdkafka does not log it (docs/design.md)."""
    from confluent_kafka import Producer

    from jetspark.datasources.kafka.consumers import consumer_conf

    topic = kafka_topic(partitions=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(300):
        producer.produce(topic, value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    ours = _queue_full_backoffs(kafka_bootstrap, topic)
    assert ours and all("Fetch backoff for 10ms: Local: Queue full" in line for line in ours), ours
    theirs = _queue_full_backoffs(kafka_bootstrap, topic, **{"fetch.queue.backoff.ms": "500"})
    assert theirs and all("Fetch backoff for 500ms: Local: Queue full" in line for line in theirs), theirs
    for name in ("fetch.queue.backoff.ms", "fetch.wait.max.ms"):
        assert consumer_conf({"bootstrap.servers": "b"})[name] == "10"
        assert consumer_conf({name: "500"})[name] == "500"


def test_a_chunk_is_bounded_by_bytes_header_entries_included(kafka_bootstrap, kafka_topic):
    """Records of 2,000 empty header entries each (no key, value or header bytes, ~16 KB of
    offsets in a chunk): max_bytes stops a chunk by all its buffers, so the entries count."""
    from confluent_kafka import Producer

    from jetspark.datasources.kafka.consumers import consumer_conf

    topic = kafka_topic(partitions=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for _ in range(20):
        producer.produce(topic, value=b"", partition=0, headers=[("", b"")] * 2_000)
    assert producer.flush(30) == 0
    reader = kafka_native.NativeConsumer(consumer_conf({"bootstrap.servers": kafka_bootstrap,
                                                        "group.id": f"bound-{uuid.uuid4().hex[:8]}"}))._reader
    reader.assign(topic, 0, 0)
    chunks = []
    while sum(chunks) < 20 and len(chunks) < 20:
        raw = reader.read(1_000, 20, 30_000, True, max_bytes=50_000)
        assert raw["error_code"] == 0, raw["error"]
        chunks.append(raw["rows"])
        assert len(raw["headers"]["key"][1]) // 4 - 1 == 2_000 * raw["rows"]  # every entry read
    assert sum(chunks) == 20 and 1 < max(chunks) < 20 and len(chunks) > 1, chunks
    reader.assign(topic, 0, 0)  # without headers the same bound holds all 20 small records
    assert reader.read(1_000, 20, 30_000, False, max_bytes=50_000)["rows"] == 20
