"""jetkafka's lag where Kafka users look: Spark's progress (latestOffset) and, with
commitOffsetsToGroup, the consumer group that Kafka's own kafka-consumer-groups tool describes."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest
from pyspark_jetkafka import DefaultSource

from jetspark.devtools.services.kafka import CONSUMER_GROUPS, tool_command
from jetspark.listener import offsets_behind_latest
from tests.integration.scripts.jetkafka_common import numbered, produce

pytestmark = pytest.mark.integration


def describe_group(bootstrap: str, group: str, topic: str) -> dict[int, tuple[int, int, int]]:
    """``kafka-consumer-groups.sh --describe``: partition -> (current offset, log-end offset, lag)."""
    run = subprocess.run(tool_command(CONSUMER_GROUPS, "--bootstrap-server", bootstrap, "--describe",
                                      "--group", group), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    out = {}
    for line in run.stdout.splitlines():
        cols = line.split()
        if len(cols) >= 6 and cols[0] == group and cols[1] == topic:
            out[int(cols[2])] = (int(cols[3]), int(cols[4]), int(cols[5]))
    return out


def lag_stream(spark, bootstrap, topic, group):
    return (spark.readStream.format("jetkafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest")
            .option("kafka.group.id", group).option("commitOffsetsToGroup", "true").load())


def test_group_offsets_show_the_lag_in_kafkas_tool_and_are_never_read_back(spark, kafka_bootstrap,
                                                                          kafka_topic, tmp_path):
    spark.dataSource.register(DefaultSource)
    topic = kafka_topic(2)
    group = f"lag-{uuid.uuid4().hex[:8]}"
    produce(kafka_bootstrap, topic, numbered(0, 0, 20) + numbered(1, 0, 12))

    query = (lag_stream(spark, kafka_bootstrap, topic, group).writeStream.format("noop")
             .option("checkpointLocation", str(tmp_path / "first")).start())
    query.processAllAvailable()
    progress = query.recentProgress
    query.stop()
    assert query.exception() is None
    latest = [json.loads(p["sources"][0]["latestOffset"])["offsets"] for p in progress
              if p["sources"][0].get("latestOffset")]
    assert {topic: {"0": 20, "1": 12}} in latest

    produce(kafka_bootstrap, topic, numbered(0, 20, 5))  # the query is behind by these 5
    assert describe_group(kafka_bootstrap, group, topic) == {0: (20, 25, 5), 1: (12, 12, 0)}

    # A new checkpoint starts at startingOffsets (earliest), not at the group's offsets; its
    # batch's end is committed before an AvailableNow query ends.
    rows: list = []
    second = (lag_stream(spark, kafka_bootstrap, topic, group).writeStream
              .foreachBatch(lambda batch, _id: rows.extend(batch.collect()))
              .option("checkpointLocation", str(tmp_path / "second")).trigger(availableNow=True).start())
    second.awaitTermination(120)
    assert second.exception() is None
    assert len(rows) == 37
    assert describe_group(kafka_bootstrap, group, topic) == {0: (25, 25, 0), 1: (12, 12, 0)}


def test_progress_reports_the_latest_offsets_without_the_option(spark, kafka_bootstrap, kafka_topic,
                                                                tmp_path):
    spark.dataSource.register(DefaultSource)
    topic = kafka_topic(1)
    produce(kafka_bootstrap, topic, numbered(0, 0, 9))
    query = (spark.readStream.format("jetkafka").option("kafka.bootstrap.servers", kafka_bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "4").load()
             .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "q"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    first = query.recentProgress[0]["sources"][0]
    assert json.loads(first["endOffset"])["offsets"] == {topic: {"0": 4}}  # the limit admitted 4
    # of 9 in the log, with Spark's Kafka lag metrics: the batch's end is 5 behind
    assert json.loads(first["latestOffset"]) == {
        "offsets": {topic: {"0": 9}}, "minOffsetsBehindLatest": 5, "maxOffsetsBehindLatest": 5,
        "avgOffsetsBehindLatest": 5.0}
    assert offsets_behind_latest(query.recentProgress[0])[0] == {
        "minOffsetsBehindLatest": 5.0, "maxOffsetsBehindLatest": 5.0, "avgOffsetsBehindLatest": 5.0}
    assert offsets_behind_latest(query.lastProgress)[0]["maxOffsetsBehindLatest"] == 0.0
