"""Benchmark: typed values written as Avro — jetkafka's sink with ``value.format=avro`` against
Spark's own ``to_avro`` + the wire header + ``format("kafka")`` with the same schema.

The rows are ``bench_avro.py``'s orders (20 fields, a nested record, an array of records,
unions with null, a map, an enum, timestamp, date and decimal logical types), read once from
its topic (created and filled on first use) and cached, so each contender's time is its
encoding and producing. Each run writes the whole DataFrame to a new topic of ``--partitions``
partitions in one batch query, in one Spark session (local[2]), at least once (Spark's Kafka
sink has no exactly-once; jetkafka's ``guarantee=at-least-once``, the idempotent producer):

* ``spark``: ``concat(header, to_avro(value, schema))`` (spark-avro) into ``format("kafka")``;
* ``jetspark``: ``format("jetkafka")`` with ``value.format=avro``, the schema the subject's;
* ``bytes``: ``format("jetkafka")`` writing the values Spark encoded, as bytes: the ceiling of
  any encoder in front of jetkafka's producer.

Runs alternate (Spark's first); the median of ``--repeat`` runs of each is reported in records
per second, with jetspark's ratio to Spark's and the load average. Every value jetkafka wrote
in the last run is checked to read back, by jetkafka's own decoder, as the rows it was given.

    .venv/bin/python bench/bench_avro_sink.py [--records 1000000] [--partitions 4] [--repeat 3]
"""

from __future__ import annotations

import json
import uuid

from bench_avro import ORDER, SUBJECT, ensure_topic
from typed_bench import SPARK_AVRO, arguments, run_and_report, services, session_conf


def main() -> int:
    args = arguments(__doc__, 1_000_000, 4)
    from confluent_kafka.admin import AdminClient, NewTopic
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro
    from pyspark_jetkafka import DefaultSource

    from jetspark.devtools.maven import SPARK_KAFKA, spark_jars_conf
    from jetspark.devtools.spark import local_session

    bootstrap, registry = services()
    source, schema_id = ensure_topic(bootstrap, registry, args.records, 8, args.distinct)
    jars = spark_jars_conf([*SPARK_KAFKA, SPARK_AVRO])
    spark = local_session("bench-avro-sink", conf=session_conf(args, jars))
    spark.dataSource.register(DefaultSource)
    schema = json.dumps(ORDER)
    header = F.lit(b"\x00" + schema_id.to_bytes(4, "big"))
    rows = (spark.read.format("jetkafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source).option("startingOffsets", "earliest").option("value.format", "avro")
            .option("schemaRegistry.url", registry).option("value.subject", SUBJECT).load()
            .select("value").cache())
    encoded = rows.select(F.concat(header, to_avro(F.col("value"), schema)).alias("value")).cache()
    assert rows.count() == encoded.count() == args.records
    admin = AdminClient({"bootstrap.servers": bootstrap})
    written: dict[str, list[str]] = {}

    def new_topic(contender: str) -> str:
        name = f"jetbench_avro_sink_{contender}_{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(name, args.partitions, 1)])[name].result(60)
        written.setdefault(contender, []).append(name)
        return name

    def jetkafka(contender: str, df, **options: str):
        return lambda: (df.write.format("jetkafka").option("kafka.bootstrap.servers", bootstrap)
                        .option("topic", new_topic(contender)).option("guarantee", "at-least-once")
                        .options(**options).mode("append").save())

    def spark_kafka():
        (encoded.write.format("kafka").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", new_topic("spark")).save())

    contenders = {
        "spark": lambda: spark_kafka,
        "jetspark": lambda: jetkafka("jetspark", rows, **{
            "value.format": "avro", "schemaRegistry.url": registry, "value.subject": SUBJECT}),
        "bytes": lambda: jetkafka("bytes", encoded),
    }
    try:
        run_and_report("avro-sink", contenders, args.records, args.repeat, "to_avro+kafka",
                       {"partitions": args.partitions, "distinct": args.distinct,
                        "schema_fields": len(ORDER["fields"]), "schema_id": schema_id,
                        "arrow_checks": args.arrow_checks})
        back = (spark.read.format("jetkafka").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", written["jetspark"][-1]).option("value.format", "avro")
                .option("schemaRegistry.url", registry).option("value.subject", SUBJECT).load())
        assert back.where("valueError IS NOT NULL").count() == 0
        as_json = F.to_json("value")  # a map has no equality in Spark: compared as JSON
        assert back.select(as_json).exceptAll(rows.select(as_json)).count() == 0
        assert back.count() == args.records
        print(f"the {args.records} values jetkafka wrote read back as the rows it was given", flush=True)
    finally:
        admin.delete_topics([t for topics in written.values() for t in topics])
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
