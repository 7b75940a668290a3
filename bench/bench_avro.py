"""Benchmark: Avro values read into typed columns — jetkafka's ``value.format=avro`` against
Spark's own ``format("kafka")`` + ``substring`` + ``from_avro`` with the same schema.

One topic (default 5 million records, 8 partitions; created and filled once, reused by later
runs of the same size and schema id) holds records of a realistic order schema — 20 fields,
a nested record, an array of records, unions with null, a map, an enum, timestamp, date and
decimal logical types — in Confluent's wire format, the schema registered in the Schema
Registry (``JETSPARK_SCHEMA_REGISTRY_URL``, else ``jetspark services up registry``). The
values are encoded with fastavro (a pool of ``--distinct`` records, cycled).

Each contender reads the whole topic in one batch query into the ``noop`` sink, its fields
selected as columns, in one Spark session (local[2]):

* ``spark``: ``format("kafka")`` (spark-sql-kafka) then
  ``from_avro(substring(value, 6, …), schema)`` (spark-avro, both from Maven Central);
* ``jetspark``: ``format("jetkafka")`` with ``value.format=avro`` and ``schemaRegistry.url``;
* ``bytes``: ``format("jetkafka")`` reading the values as bytes: the ceiling of any decoder;
* ``handoff`` (with ``--handoff``): jetspark's decoded rows handed to Spark as ready-made Arrow
  batches by a Python data source, no Kafka and no decoding: the JVM's share of the typed read.

Each run prints the CPU seconds the Spark JVM and the Python workers spent in it. By default the
session runs with Arrow's checks in the JVM off (docs/how-to/deploy.md); ``--arrow-checks``
keeps Spark's default.

Runs alternate (Spark's first, so the cold first run is Spark's); the median of ``--repeat``
runs of each is reported in records per second, with jetspark's ratio to Spark's and the load
average. A report goes to ``bench/reports/``.

    .venv/bin/python bench/bench_avro.py [--records 5000000] [--partitions 8] [--repeat 3]
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from decimal import Decimal

from typed_bench import (
    SPARK_AVRO,
    arguments,
    fill_topic,
    handoff,
    run_and_report,
    same_sample,
    services,
    session_conf,
)

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "bench.shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "email", "type": ["null", "string"], "default": None},
        {"name": "amount", "type": "double"},
        {"name": "tax", "type": "float"},
        {"name": "items", "type": "int"},
        {"name": "paid", "type": "boolean"},
        {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {
            "name": "shipped",
            "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}],
            "default": None,
        },
        {"name": "due", "type": {"type": "int", "logicalType": "date"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {"name": "channel", "type": "string"},
        {"name": "coupon", "type": ["null", "string"], "default": None},
        {
            "name": "address",
            "type": {
                "type": "record",
                "name": "Address",
                "fields": [
                    {"name": "street", "type": "string"},
                    {"name": "city", "type": "string"},
                    {"name": "zip", "type": ["null", "int"], "default": None},
                    {"name": "country", "type": "string"},
                ],
            },
        },
        {
            "name": "lines",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Line",
                    "fields": [
                        {"name": "sku", "type": "string"},
                        {"name": "qty", "type": "int"},
                        {"name": "unit", "type": "double"},
                    ],
                },
            },
        },
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attributes", "type": {"type": "map", "values": "string"}},
        {"name": "score", "type": ["null", "double"], "default": None},
        {"name": "version", "type": "int"},
    ],
}


SUBJECT = "bench-avro-orders-value"


def _record(i: int) -> dict:
    return {
        "id": i,
        "customer": f"customer-{i % 5000}",
        "email": None if i % 4 else f"c{i}@example.com",
        "amount": i * 0.25,
        "tax": 0.2,
        "items": i % 9,
        "paid": i % 2 == 0,
        "placed": datetime(2026, 11, 1, tzinfo=UTC),
        "shipped": None if i % 3 else datetime(2026, 11, 2, tzinfo=UTC),
        "due": 20_500 + i % 30,
        "price": Decimal(i % 100_000).scaleb(-2),
        "status": ["NEW", "PAID", "SHIPPED"][i % 3],
        "channel": ["web", "shop", "app"][i % 3],
        "coupon": None if i % 7 else "SAVE10",
        "address": {
            "street": f"{i % 300} Main Street",
            "city": "Springfield",
            "zip": None if i % 11 else 12345,
            "country": "US",
        },
        "lines": [{"sku": f"sku-{(i + k) % 1000}", "qty": 1 + k, "unit": 9.99} for k in range(i % 4)],
        "tags": ["gift", "express"][: i % 3],
        "attributes": {"source": "bench"} if i % 2 else {},
        "score": None if i % 5 else 0.5,
        "version": 2,
    }


def ensure_topic(
    bootstrap: str, registry: str, records: int, partitions: int, distinct: int
) -> tuple[str, int]:
    """The topic (created and filled on first use) and the schema id its records carry."""
    import fastavro
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    schema_id = SchemaRegistryClient({"url": registry}).register_schema(
        SUBJECT, Schema(json.dumps(ORDER), "AVRO")
    )
    topic = f"jetbench_avro_{records}_{partitions}_{schema_id}"
    parsed = fastavro.parse_schema(ORDER)
    header = b"\x00" + schema_id.to_bytes(4, "big")
    pool = []
    for i in range(distinct):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, _record(i))
        pool.append(header + buf.getvalue())
    fill_topic(bootstrap, topic, pool, records, partitions)
    return topic, schema_id


def main() -> int:
    args = arguments(__doc__, 5_000_000, 8)
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro
    from pyspark_jetkafka import DefaultSource

    from jetspark.devtools.maven import SPARK_KAFKA, spark_jars_conf
    from jetspark.devtools.spark import local_session

    bootstrap, registry = services()
    topic, schema_id = ensure_topic(bootstrap, registry, args.records, args.partitions, args.distinct)
    spark = local_session("bench-avro", conf=session_conf(args, spark_jars_conf([*SPARK_KAFKA, SPARK_AVRO])))
    spark.dataSource.register(DefaultSource)
    schema = json.dumps(ORDER)

    def kafka(fmt: str):
        return (
            spark.read.format(fmt)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
        )

    def avro_reader():
        return (
            kafka("jetkafka")
            .option("value.format", "avro")
            .option("schemaRegistry.url", registry)
            .option("value.subject", SUBJECT)
            .load()
        )

    def spark_avro():
        return from_avro(F.expr("substring(value, 6, length(value) - 5)"), schema).alias("v")

    contenders = {
        "spark": lambda: kafka("kafka").load().select(spark_avro()).select("v.*").write,
        "jetspark": lambda: avro_reader().select("value.*").write,
        "bytes": lambda: kafka("jetkafka").load().select("value").write,
    }
    check = avro_reader()
    bad = check.where("valueError IS NOT NULL").count()
    assert bad == 0, f"{bad} records did not decode"
    # the same values as Spark's from_avro, on a sample of the topic
    ours = check.where("offset < 500").select("partition", "offset", "value.*").collect()
    theirs = (
        kafka("kafka")
        .load()
        .where("offset < 500")
        .select("partition", "offset", spark_avro())
        .select("partition", "offset", "v.*")
        .collect()
    )
    same_sample(ours, theirs, "from_avro")
    if args.handoff:
        contenders["handoff"] = handoff(spark, check, args.records, args.partitions)
    try:
        run_and_report("avro", contenders, args.records, args.repeat, "kafka+from_avro",
                       {"partitions": args.partitions, "distinct": args.distinct,
                        "schema_fields": len(ORDER["fields"]), "schema_id": schema_id,
                        "arrow_checks": args.arrow_checks})
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
