"""Benchmark: jetjdbc and the Kafka sink against Spark's own JDBC and Kafka writers.

The same cached DataFrame (``--rows`` rows of id bigint, name string, amount double in
``--partitions`` partitions) is written, in one Spark session, by

* PostgreSQL: Spark's JDBC writer (``org.postgresql:postgresql`` from Maven Central via
  ``jetspark.devtools.maven``, batched
  INSERTs; once with defaults and once with ``reWriteBatchedInserts=true``), and
  ``format("jetjdbc")`` with commit two-phase, upsert and none (at-least-once, COPY);
* Kafka (key = id, value = name): Spark's Kafka sink (``spark-sql-kafka-0-10``,
  at-least-once) and our Kafka sink with guarantee exactly-once (commit task) and at-least-once.

jetjdbc two-phase runs twice: with ``onRejected=dead-letter`` (the default: every COPY under a
savepoint, so that a row PostgreSQL refuses can be set aside) and with ``onRejected=fail``
(no savepoint), which shows what the savepoints cost.

After a warm-up write of 1,000 rows by every writer, each runs ``--repeat`` times into a
fresh table / topic, the writers alternating in each round; the median run counts. The
output is rows per second and the ratio to Spark's writer, with the load average; a report
goes to ``bench/reports/``.

    .venv/bin/python bench/bench_sinks.py [--rows 1000000] [--partitions 2] [--repeat 3]

Endpoints: ``JETSPARK_PG_DSN`` / ``JETSPARK_KAFKA_BOOTSTRAP`` or jetspark's service discovery.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def endpoints() -> tuple[str, str]:
    from jetspark.devtools.services import Endpoints, acquire

    env = Endpoints.from_env()
    if env.pg_dsn and env.kafka_bootstrap:
        return env.pg_dsn, env.kafka_bootstrap
    found = acquire().endpoints
    return found.pg_dsn, found.kafka_bootstrap


def timed(run: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0


SMALL_ROWS = 1_000


def per_task_overhead(dsn: str, schema: str, tasks: int) -> dict[str, float]:
    """Milliseconds per small task (one micro-batch partition) for each jetjdbc commit, measured
    on the sink alone: the task's write plus, for two-phase, the driver's COMMIT PREPARED."""
    import psycopg
    import pyarrow as pa
    from pyspark.sql import types as T

    from jetspark.sinks.guarantees import COMMITS, GIVES
    from jetspark.sinks.jdbc.options import JdbcSinkOptions
    from jetspark.sinks.jdbc.plain import copy_append, copy_upsert
    from jetspark.sinks.jdbc.resource import PostgresResource
    from jetspark.sinks.jdbc.target import prepare_target
    from jetspark.sinks.transactional import PartitionKey, commit_batch, write_partition

    spark_schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("name", T.StringType()),
                                 T.StructField("amount", T.DoubleType())])
    ids = pa.array(range(SMALL_ROWS), pa.int64())
    batch = pa.RecordBatch.from_arrays(
        [ids, pa.array([f"name-{i}" for i in range(SMALL_ROWS)]), pa.compute.multiply(ids, 0.25)],
        ["id", "name", "amount"])
    result = {}
    for mode in COMMITS:
        table = f"small_{mode.replace('-', '_')}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            key = "PRIMARY KEY" if mode == "upsert" else ""
            conn.execute(f'CREATE TABLE "{schema}"."{table}" (id bigint {key}, name text, '
                         f'amount double precision)')
        options = JdbcSinkOptions.parse({"url": dsn, "table": f"{schema}.{table}", "guarantee": GIVES[mode],
                                         "commit": mode, "keys": "id",
                                         "sinkId": "bench"})
        target = prepare_target(options, spark_schema, False)
        t0 = time.perf_counter()
        for task in range(tasks):
            key = PartitionKey("bench", task, 0, 0)
            if mode == "none":
                copy_append(target, key, iter([batch]))
            elif mode == "upsert":
                copy_upsert(target, key, iter([batch]))
            else:
                with PostgresResource(target, two_phase=mode == "two-phase") as resource:
                    message = write_partition(resource, key, iter([batch]))
                    commit_batch(resource, [message], task)
        result[mode] = (time.perf_counter() - t0) * 1000 / tasks
        print(f"per task: {mode:14s} {result[mode]:.2f} ms", flush=True)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--small-tasks", type=int, default=200, help="tasks of the per-task overhead test")
    args = ap.parse_args()

    import psycopg
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    from pyspark.sql.datasource import DataSource

    from jetspark.devtools.maven import POSTGRES_JDBC, SPARK_KAFKA, spark_jars_conf
    from jetspark.devtools.spark import local_session
    from jetspark.sinks.guarantees import GIVES
    from jetspark.sinks.jdbc.writer import JdbcDataSource
    from jetspark.sinks.kafka.writer import make_kafka_writer

    class KafkaSinkBench(DataSource):  # what the jetkafka DataSource delegates to
        @classmethod
        def name(cls) -> str:
            return "jetkafka_sink_bench"

        def writer(self, schema, overwrite):
            return make_kafka_writer(schema, overwrite, self.options)

    dsn, bootstrap = endpoints()
    spark = local_session("bench-sinks", conf=spark_jars_conf([*POSTGRES_JDBC, *SPARK_KAFKA]))
    spark.dataSource.register(JdbcDataSource)
    spark.dataSource.register(KafkaSinkBench)
    df = (spark.range(0, args.rows, numPartitions=args.partitions)
          .selectExpr("id", "concat('name-', id) AS name", "id * 0.25 AS amount").cache())
    df.count()
    kv = df.selectExpr("CAST(id AS STRING) AS key", "name AS value").cache()
    kv.count()

    schema = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    from jetspark.devtools.services.postgres import jdbc_url

    url, props = jdbc_url(dsn)

    def fresh_table(key: bool) -> str:
        name = f"t_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'CREATE TABLE "{schema}"."{name}" (id bigint {"PRIMARY KEY" if key else ""}, '
                         f'name text, amount double precision)')
        return f"{schema}.{name}"

    def check_rows(table: str) -> None:
        with psycopg.connect(dsn) as conn:
            n = conn.execute(f'SELECT count(*) FROM {table}').fetchone()[0]
        assert n == args.rows, f"{table} has {n} rows, expected {args.rows}"

    def spark_jdbc(extra: dict[str, str]) -> Callable[[], str]:
        def run() -> str:
            table = fresh_table(False)
            w = df.write.format("jdbc").option("url", url + ("?reWriteBatchedInserts=true" if extra else ""))
            w = w.option("dbtable", table).option("driver", "org.postgresql.Driver")
            for k, v in props.items():
                w = w.option(k, v)
            w.mode("append").save()
            return table
        return run

    def jetjdbc(mode: str, on_rejected: str = "dead-letter") -> Callable[[], str]:
        def run() -> str:
            table = fresh_table(mode == "upsert")
            w = (df.write.format("jetjdbc").option("url", dsn).option("table", table)
                 .option("guarantee", GIVES[mode]).option("commit", mode).option("onRejected", on_rejected))
            if mode == "upsert":
                w = w.option("keys", "id")
            w.mode("append").save()
            return table
        return run

    admin = AdminClient({"bootstrap.servers": bootstrap})

    def fresh_topic() -> str:
        name = f"jetbench_sink_{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(name, args.partitions, 1)])[name].result(60)
        return name

    def topic_count(topic: str) -> int:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-count"})
        total = 0
        for p in range(args.partitions):
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            total += high - low
        c.close()
        return total

    def spark_kafka() -> str:
        topic = fresh_topic()
        kv.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save()
        return topic

    def our_kafka(mode: str) -> Callable[[], str]:
        def run() -> str:
            topic = fresh_topic()
            (kv.write.format("jetkafka_sink_bench").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", topic).option("guarantee", mode).mode("append").save())
            return topic
        return run

    pg_writers: dict[str, Callable[[], str]] = {
        "spark jdbc (defaults)": spark_jdbc({}),
        "spark jdbc (reWriteBatchedInserts)": spark_jdbc({"rewrite": "true"}),
        "jetjdbc two-phase": jetjdbc("two-phase"),
        "jetjdbc two-phase (onRejected=fail)": jetjdbc("two-phase", "fail"),
        "jetjdbc upsert": jetjdbc("upsert"),
        "jetjdbc none (at-least-once)": jetjdbc("none"),
    }
    kafka_writers: dict[str, Callable[[], str]] = {
        "spark kafka (at-least-once)": spark_kafka,
        "our kafka exactly-once": our_kafka("exactly-once"),
        "our kafka at-least-once": our_kafka("at-least-once"),
    }
    rates: dict[str, list[float]] = {}
    warm = {"df": df, "kv": kv}
    df, kv = df.limit(1000), kv.limit(1000)  # warm-up: JVM classes, Python workers, connections
    for name, writer in [*pg_writers.items(), *kafka_writers.items()]:
        target = writer()
        if name in kafka_writers:
            admin.delete_topics([target])
    df, kv = warm["df"], warm["kv"]
    for round_no in range(args.repeat):
        for name, writer in [*pg_writers.items(), *kafka_writers.items()]:
            holder: dict[str, str] = {}
            seconds = timed(lambda w=writer, h=holder: h.__setitem__("target", w()))
            if name in pg_writers:
                check_rows(holder["target"])
            else:
                assert topic_count(holder["target"]) >= args.rows, f"{name}: too few records"
                admin.delete_topics([holder["target"]])
            rate = args.rows / seconds
            rates.setdefault(name, []).append(rate)
            print(f"round {round_no + 1}: {name:38s} {rate:12,.0f} rows/s ({seconds:.2f} s)", flush=True)

    per_task = per_task_overhead(dsn, schema, tasks=args.small_tasks)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')

    median = {name: statistics.median(runs) for name, runs in rates.items()}
    jdbc_base = median["spark jdbc (defaults)"]
    kafka_base = median["spark kafka (at-least-once)"]
    load = os.getloadavg()
    lines = [f"# Sinks: {args.rows:,} rows, {args.partitions} partitions, median of {args.repeat} "
             f"alternating runs; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", "",
             "| writer | rows/s | vs Spark |", "|---|---:|---:|"]
    for name, rate in median.items():
        base = jdbc_base if name in pg_writers else kafka_base
        lines.append(f"| {name} | {rate:,.0f} | {rate / base:.2f}x |")
    lines += ["", f"Per task (micro-batch partition) of {SMALL_ROWS} rows, sink alone (no Spark), "
              f"mean of {args.small_tasks}:", "", "| commit | ms per task | rows/s |", "|---|---:|---:|"]
    for mode, ms in per_task.items():
        lines.append(f"| {mode} | {ms:.2f} | {SMALL_ROWS / ms * 1000:,.0f} |")
    report = "\n".join(lines)
    print("\n" + report)
    out_dir = ROOT / "bench" / "reports"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (out_dir / f"sinks-{stamp}.md").write_text(report + "\n")
    (out_dir / f"sinks-{stamp}.json").write_text(json.dumps(
        {"rows": args.rows, "partitions": args.partitions, "repeat": args.repeat, "rows_per_s": median,
         "runs": rates, "per_task_ms": per_task, "load_average": load}, indent=2))
    spark.stop()


if __name__ == "__main__":
    sys.exit(main())
