"""``jetspark demo``: a real pipeline, end to end, on services it starts itself.

Kafka (4 partitions of vehicle positions, produced transactionally) → Spark Structured
Streaming (Trigger.AvailableNow) → 30-second windows sliding by 10 seconds (count and
mean speed per vehicle) → PostgreSQL; then the table is checked against a naive
reference computed from the produced events.

This is the foundation's smoke pipeline: it runs on Spark's own Kafka source and
``window()``. The jetspark formats replace those stages as they land.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
import uuid
from collections import defaultdict

WINDOW_S, SLIDE_S = 30, 10
NEEDED = ("kafka", "postgres")


def _events(n: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    # Recent event times: Kafka's retention would delete records stamped years ago.
    start = (int(time.time() * 1000) - n * 50) // 60_000 * 60_000
    return [
        {"vehicle": f"v{rng.randrange(20):02d}", "ts": start + i * 50 + rng.randrange(2_000),
         "speed": round(rng.uniform(0, 130), 2)}
        for i in range(n)
    ]


def _produce(bootstrap: str, topic: str, events: list[dict], partitions: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap,
                         "transactional.id": f"jetspark-demo-{uuid.uuid4().hex}",
                         "linger.ms": 20})
    producer.init_transactions(30)
    producer.begin_transaction()
    for e in events:
        producer.produce(topic, json.dumps(e).encode(), e["vehicle"].encode(), timestamp=e["ts"])
        producer.poll(0)
    producer.commit_transaction(60)


def _reference(events: list[dict]) -> dict[tuple[str, int], tuple[int, float]]:
    """Naive sliding windows: every event copied into each window that contains it."""
    acc: dict[tuple[str, int], list[float]] = defaultdict(list)
    for e in events:
        last = e["ts"] // (SLIDE_S * 1000) * SLIDE_S * 1000
        for start in range(last - (WINDOW_S - SLIDE_S) * 1000, last + 1, SLIDE_S * 1000):
            acc[(e["vehicle"], start)].append(e["speed"])
    return {k: (len(v), sum(v) / len(v)) for k, v in acc.items()}


def run_demo(args: argparse.Namespace) -> int:
    import psycopg
    from pyspark.sql import functions as F

    from jetspark.maven import SPARK_KAFKA, spark_jars_conf
    from jetspark.services import ENV_VARS, acquire
    from jetspark.spark import local_session

    t0 = time.monotonic()
    if args.external:
        missing = [v for k, v in ENV_VARS.items() if k in NEEDED and not os.environ.get(v)]
        if missing:
            print(f"--external: set {', '.join(missing)} to the services to use")
            return 2
    services = acquire(NEEDED)  # JETSPARK_* variables first, then Docker, then local
    ep = services.endpoints
    print("services: " + ", ".join(f"{k} ({v})" for k, v in services.origin.items()))
    try:
        topic = f"demo_positions_{uuid.uuid4().hex[:8]}"
        table = f"demo_windows_{uuid.uuid4().hex[:8]}"
        events = _events(args.records)
        _produce(ep.kafka_bootstrap, topic, events, args.partitions)
        print(f"produced {len(events)} events to {topic} ({args.partitions} partitions)")
        with psycopg.connect(ep.pg_dsn, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {table} (vehicle text, window_start timestamptz, "
                         "n bigint, mean_speed double precision, PRIMARY KEY (vehicle, window_start))")

        spark = local_session("jetspark-demo", conf=spark_jars_conf(SPARK_KAFKA))
        raw = (spark.readStream.format("kafka")
               .option("kafka.bootstrap.servers", ep.kafka_bootstrap)
               .option("subscribe", topic).option("startingOffsets", "earliest").load())
        schema = "vehicle string, ts long, speed double"
        parsed = raw.select(F.from_json(F.col("value").cast("string"), schema).alias("e")).select(
            "e.vehicle", F.timestamp_millis("e.ts").alias("event_time"), "e.speed")
        windows = (parsed.groupBy("vehicle", F.window("event_time", f"{WINDOW_S} seconds",
                                                      f"{SLIDE_S} seconds"))
                   .agg(F.count("*").alias("n"), F.avg("speed").alias("mean_speed")))

        def write(batch_df, batch_id: int) -> None:
            rows = batch_df.select("vehicle", "window.start", "n", "mean_speed").collect()
            with psycopg.connect(ep.pg_dsn) as conn, conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO {table} VALUES (%s, %s, %s, %s) ON CONFLICT (vehicle, "
                    "window_start) DO UPDATE SET n = EXCLUDED.n, mean_speed = EXCLUDED.mean_speed",
                    [tuple(r) for r in rows])
            print(f"  batch {batch_id}: {len(rows)} windows upserted")

        with tempfile.TemporaryDirectory(prefix="jetspark-demo-") as checkpoint:
            query = (windows.writeStream.outputMode("update").foreachBatch(write)
                     .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
            query.awaitTermination()
        spark.stop()

        expected = _reference(events)
        with psycopg.connect(ep.pg_dsn) as conn:
            got = {(v, int(ws.timestamp() * 1000)): (n, m) for v, ws, n, m in
                   conn.execute(f"SELECT vehicle, window_start, n, mean_speed FROM {table}")}
        mismatched = [k for k in expected
                      if k not in got or got[k][0] != expected[k][0]
                      or abs(got[k][1] - expected[k][1]) > 1e-9]
        extra = set(got) - set(expected)
        ok = not mismatched and not extra
        print(f"rows in: {len(events)}; windows written: {len(got)}; "
              f"reference windows: {len(expected)}; table equals reference: {ok}")
        print(f"done in {time.monotonic() - t0:.1f} s")
        return 0 if ok else 1
    finally:
        if not args.keep_services:
            services.release()
