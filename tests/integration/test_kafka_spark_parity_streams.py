"""jetkafka's streams against Spark's own Kafka connector (spark-sql-kafka 4.2.0, the newest the
Maven repository at hand serves for PySpark 4.x; ``SPARK_KAFKA`` in jetspark/devtools/maven.py),
on the same topics: ``startingOffsets=latest``, ``minPartitions``, ``failOnDataLoss=true``
after deleted records, and partitions and topics added between two runs of a ``subscribe`` or
``subscribePattern`` stream and while one runs. The helpers and the pinned differences are those of
tests/integration/test_kafka_spark_parity.py.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions
from pyspark.sql import functions as F

from tests.integration import test_kafka_spark_parity as parity
from tests.integration.scripts.jetkafka_common import BASE_TS, numbered, produce
from tests.integration.test_kafka_spark_parity import (
    FORMATS,
    _columns,
    _delete_before,
    _options,
    _sorted,
    assert_same_rows,
    read_stream,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark_kafka]
sk = parity.sk  # the fixtures of the parity tests
named_topics = parity.named_topics


def _flat(batches) -> list[tuple]:
    return _sorted([r for b in batches for r in b])


def test_starting_offsets_latest_stream(sk, kafka_bootstrap, kafka_topic, tmp_path):
    """The first run starts at the end (no rows); a restart on its checkpoint reads what came
    after, from where the first run started, not from the restart's end."""
    topic = kafka_topic(2)
    produce(kafka_bootstrap, topic, numbered(0, 0, 5) + numbered(1, 0, 4))
    options = _options(kafka_bootstrap, subscribe=topic, startingOffsets="latest")
    checkpoints = {fmt: tmp_path / f"ck-{fmt}" for fmt in FORMATS}
    first = {fmt: _flat(read_stream(sk, fmt, options, checkpoints[fmt])) for fmt in FORMATS}
    assert first == {"kafka": [], "jetkafka": []}
    produce(kafka_bootstrap, topic, numbered(0, 5, 3, ts0=BASE_TS + 500)
            + numbered(1, 4, 2, ts0=BASE_TS + 500))
    after = {fmt: _flat(read_stream(sk, fmt, options, checkpoints[fmt])) for fmt in FORMATS}
    assert_same_rows(after["kafka"], after["jetkafka"], "startingOffsets=latest, restarted")
    assert sorted((r[3], r[4]) for r in after["kafka"]) == [(0, 5), (0, 6), (0, 7), (1, 4), (1, 5)]


def _tasks_of_each_batch(spark, fmt: str, options: dict[str, str], checkpoint) -> list[list[tuple]]:
    """Each micro-batch's tasks as sorted (topic, partition, first offset, last offset, rows)."""
    batches: dict[int, list[tuple]] = {}

    def collect(batch, batch_id: int) -> None:
        tasks = (batch.groupBy(F.spark_partition_id().alias("task"), "topic", "partition")
                 .agg(F.min("offset"), F.max("offset"), F.count("*")).drop("task").collect())
        batches[batch_id] = sorted(tuple(r) for r in tasks)

    df = spark.readStream.format(fmt).options(**options).load().select(*_columns(options))
    query = (df.writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None
    return [batches[i] for i in sorted(batches) if batches[i]]


def test_min_partitions_splits_a_streams_ranges_as_spark_does(sk, kafka_bootstrap, kafka_topic, tmp_path):
    """``minPartitions=7`` over partitions of 30, 10 and 1 records, in micro-batches of at most
    25 offsets: the same tasks (the same offset ranges) in each micro-batch, the same rows."""
    topic = kafka_topic(3)
    produce(kafka_bootstrap, topic, numbered(0, 0, 30) + numbered(1, 0, 10, ts0=BASE_TS + 300)
            + numbered(2, 0, 1, ts0=BASE_TS + 700))
    options = _options(kafka_bootstrap, subscribe=topic, startingOffsets="earliest", minPartitions=7)
    tasks = {fmt: _tasks_of_each_batch(sk, fmt, options, tmp_path / f"ck-{fmt}") for fmt in FORMATS}
    assert sum(t[-1] for t in tasks["kafka"][0]) == 41 and len(tasks["kafka"][0]) >= 7
    assert tasks["jetkafka"] == tasks["kafka"]
    limited = {**options, "maxOffsetsPerTrigger": "25"}
    tasks = {fmt: _tasks_of_each_batch(sk, fmt, limited, tmp_path / f"ck2-{fmt}") for fmt in FORMATS}
    assert len(tasks["kafka"]) == 2 and sum(t[-1] for b in tasks["kafka"] for t in b) == 41
    assert tasks["jetkafka"] == tasks["kafka"]


def _error_of(spark, fmt: str, options: dict[str, str], checkpoint) -> str:
    df = spark.readStream.format(fmt).options(**options).load().select(*_columns(options))
    query = (df.writeStream.foreachBatch(lambda batch, _: batch.collect())
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    with pytest.raises(Exception) as caught:
        query.awaitTermination(300)
    return str(caught.value)


def test_fail_on_data_loss_true_after_deleted_records(sk, kafka_bootstrap, kafka_topic, tmp_path):
    """Records deleted past a stream's committed offsets: both stop on restart with Spark's
    error class for it (``KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE``), naming the option."""
    topic = kafka_topic(2)
    produce(kafka_bootstrap, topic, numbered(0, 0, 10) + numbered(1, 0, 10))
    options = _options(kafka_bootstrap, subscribe=topic, startingOffsets="earliest", failOnDataLoss="true")
    checkpoints = {fmt: tmp_path / f"ck-{fmt}" for fmt in FORMATS}
    first = {fmt: _flat(read_stream(sk, fmt, options, checkpoints[fmt])) for fmt in FORMATS}
    assert_same_rows(first["kafka"], first["jetkafka"], "before the loss")
    produce(kafka_bootstrap, topic, numbered(0, 10, 10) + numbered(1, 10, 5))
    _delete_before(kafka_bootstrap, topic, 0, 15)  # offsets 10..14 of partition 0 are gone
    errors = {fmt: _error_of(sk, fmt, options, checkpoints[fmt]) for fmt in FORMATS}
    # KafkaIllegalStateException of KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE: its text, the
    # class itself is not in the message Python sees
    assert f"Could not read records in offset [10, 20) for topic partition {topic}-0" in errors["kafka"]
    jet = errors["jetkafka"]
    assert f"[KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE] data loss in topic '{topic}' partition 0: " \
        "offsets from 10 are needed" in jet and "failOnDataLoss=false" in jet, jet[:2000]


def _growing_topic(kafka_bootstrap, named_topics, how: str) -> tuple[str, str, dict]:
    """A one-partition topic with 4 records, the name of a later topic its pattern also
    matches, and the stream options that read it (``how``: subscribe or subscribePattern)."""
    prefix = f"jetgrow_{uuid.uuid4().hex[:8]}"
    first, later = f"{prefix}_a", f"{prefix}_b"
    named_topics([first], 1)
    produce(kafka_bootstrap, first, numbered(0, 0, 4))
    sub = {"subscribe": first} if how == "subscribe" else {"subscribePattern": f"^{prefix}_.*$"}
    return first, later, _options(kafka_bootstrap, startingOffsets="earliest", **sub)


@pytest.mark.parametrize("how", ["subscribe", "subscribePattern"])
def test_partitions_and_topics_added_to_a_stream(sk, kafka_bootstrap, named_topics, tmp_path, how):
    """Partitions added to a subscribed topic (and, with a pattern, a new topic that matches it)
    after a stream's first run are read from their earliest offsets by its next run, by both."""
    first, later, options = _growing_topic(kafka_bootstrap, named_topics, how)
    checkpoints = {fmt: tmp_path / f"ck-{fmt}" for fmt in FORMATS}
    before = {fmt: _flat(read_stream(sk, fmt, options, checkpoints[fmt])) for fmt in FORMATS}
    assert_same_rows(before["kafka"], before["jetkafka"], f"{how}, before")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for fut in admin.create_partitions([NewPartitions(first, 3)]).values():
        fut.result(30)
    named_topics([later], 2)
    produce(kafka_bootstrap, first, numbered(0, 4, 2) + numbered(1, 0, 3, ts0=BASE_TS + 100)
            + numbered(2, 0, 2, ts0=BASE_TS + 200))
    produce(kafka_bootstrap, later, numbered(0, 0, 2, tag="b") + numbered(1, 0, 1, tag="b"))
    after = {fmt: _flat(read_stream(sk, fmt, options, checkpoints[fmt])) for fmt in FORMATS}
    assert_same_rows(after["kafka"], after["jetkafka"], f"{how}, partitions and topics added")
    want = [(first, 0, 4), (first, 0, 5)] + [(first, 1, i) for i in range(3)] + [(first, 2, 0), (first, 2, 1)]
    if how == "subscribePattern":
        want += [(later, 0, 0), (later, 0, 1), (later, 1, 0)]
    assert sorted((r[2], r[3], r[4]) for r in after["kafka"]) == sorted(want)


def _run_until(queries: dict, seen: dict[str, list[tuple]], want: int, rounds: int = 20) -> None:
    """``processAllAvailable`` on each query until it has ``want`` rows, at most ``rounds`` times:
    a trigger that listed the offsets before the change may end the wait before the next one
    finds it (bounded by a count of waits, not by time)."""
    for fmt, query in queries.items():
        for _ in range(rounds):
            query.processAllAvailable()
            if len(seen[fmt]) >= want:
                break


@pytest.mark.parametrize("how", ["subscribe", "subscribePattern"])
def test_partitions_and_topics_added_while_a_stream_runs(sk, kafka_bootstrap, named_topics, tmp_path, how):
    """One running query each (a processing-time trigger): after its first rows, partitions are added
    to its topic and (with a pattern) a matching topic is created, with records in each, then a
    record more in the partition it read: both read every new partition from its earliest offset
    in the same query, the same rows."""
    first, later, options = _growing_topic(kafka_bootstrap, named_topics, how)
    seen: dict[str, list[tuple]] = {fmt: [] for fmt in FORMATS}
    queries = {}
    try:
        # one query started and driven to its first rows before the next starts: jetkafka's
        # source process must connect back to the JVM soon after its launch, and with Spark's
        # query starting beside it on a loaded machine it did not ("Python worker failed to
        # connect back")
        for fmt in reversed(FORMATS):
            def collect(batch, _batch_id: int, rows=seen[fmt]) -> None:
                rows.extend(parity._norm(r) for r in batch.collect())

            df = sk.readStream.format(fmt).options(**options).load().select(*_columns(options))
            queries[fmt] = (df.writeStream.foreachBatch(collect).trigger(processingTime="200 milliseconds")
                            .option("checkpointLocation", str(tmp_path / f"ck-{fmt}")).start())
            _run_until({fmt: queries[fmt]}, seen, 4)
        assert_same_rows(_sorted(seen["kafka"]), _sorted(seen["jetkafka"]), f"{how}, running, before")
        assert len(seen["kafka"]) == 4
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        for fut in admin.create_partitions([NewPartitions(first, 3)]).values():
            fut.result(30)
        named_topics([later], 2)
        produce(kafka_bootstrap, first,
                numbered(1, 0, 3, ts0=BASE_TS + 100) + numbered(2, 0, 2, ts0=BASE_TS + 200))
        produce(kafka_bootstrap, later, numbered(0, 0, 2, tag="b") + numbered(1, 0, 1, tag="b"))
        produce(kafka_bootstrap, first, numbered(0, 4, 2))  # new data where the query already reads
        want = ([(first, 0, i) for i in range(6)] + [(first, 1, i) for i in range(3)]
                + [(first, 2, 0), (first, 2, 1)])
        if how == "subscribePattern":
            want += [(later, 0, 0), (later, 0, 1), (later, 1, 0)]
        _run_until(queries, seen, len(want))
        for query in queries.values():
            assert query.exception() is None
    finally:
        for query in queries.values():
            query.stop()
    after = {fmt: _sorted(rows) for fmt, rows in seen.items()}
    assert_same_rows(after["kafka"], after["jetkafka"], f"{how}, partitions and topics added while running")
    assert sorted((r[2], r[3], r[4]) for r in after["kafka"]) == sorted(want)
