"""Benchmark: Protobuf values read into typed columns — jetkafka's ``value.format=protobuf``
against Spark's own ``format("kafka")`` + ``substring`` + ``from_protobuf`` with the same
message.

One topic (default 5 million records, 8 partitions; created and filled once, reused by later
runs of the same size and schema id) holds messages of a realistic order — 20 fields, a nested
message, a repeated message, proto3 ``optional`` fields, a map, an enum, timestamps — in
Confluent's wire format (message index ``[0]``), the file registered in the Schema Registry
(``JETSPARK_SCHEMA_REGISTRY_URL``, else ``jetspark services up registry``). The values are
serialized by Google's protobuf runtime (a pool of ``--distinct`` messages, cycled).

Each contender reads the whole topic in one batch query into the ``noop`` sink, its fields
selected as columns, in one Spark session (local[2]):

* ``spark``: ``format("kafka")`` (spark-sql-kafka) then
  ``from_protobuf(substring(value, 7, …), "bench.shop.Order", binaryDescriptorSet=…)``
  (spark-sql-kafka from Maven Central; spark-protobuf from Maven when served, else a jar built
  beforehand from Spark's sources, see ``spark_protobuf.py``);
* ``jetspark``: ``format("jetkafka")`` with ``value.format=protobuf`` and ``schemaRegistry.url``;
* ``bytes``: ``format("jetkafka")`` reading the values as bytes: the ceiling of any decoder;
* ``handoff`` (with ``--handoff``): jetspark's decoded rows handed to Spark as ready-made Arrow
  batches, no Kafka and no decoding: the JVM's share of the typed read.

Each run prints the CPU seconds of the Spark JVM and of the Python workers. By default the session
runs with Arrow's checks in the JVM off (docs/how-to/deploy.md); ``--arrow-checks`` keeps Spark's
default.

When there is no spark-protobuf (the Maven repository at hand may not serve it, and no jar was
built), the bench says why and runs the other two: jetspark's rate against the ceiling, without
a ratio.

Runs alternate (Spark's first, so the cold first run is Spark's); the median of ``--repeat``
runs of each is reported in records per second, with jetspark's ratio to Spark's and the load
average. A report goes to ``bench/reports/``.

    .venv/bin/python bench/bench_protobuf.py [--records 5000000] [--partitions 8] [--repeat 3]
"""

from __future__ import annotations

import base64

from spark_protobuf import jars_conf as spark_protobuf_jars
from typed_bench import arguments, fill_topic, handoff, run_and_report, same_sample, services, session_conf

SUBJECT = "bench-protobuf-orders-value"
MESSAGE = "bench.shop.Order"


def order_file():
    """bench/shop/order.proto, as a FileDescriptorProto (no protoc here)."""
    from google.protobuf import descriptor_pb2

    F = descriptor_pb2.FieldDescriptorProto
    one, many = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    fdp = descriptor_pb2.FileDescriptorProto(name="bench/shop/order.proto", package="bench.shop",
                                             syntax="proto3", dependency=["google/protobuf/timestamp.proto"])
    status = fdp.enum_type.add(name="Status")
    for i, name in enumerate(["NEW", "PAID", "SHIPPED"]):
        status.value.add(name=name, number=i)
    order = fdp.message_type.add(name="Order")
    ts, optional = ".google.protobuf.Timestamp", []
    fields = [
        ("id", F.TYPE_INT64, one, None), ("customer", F.TYPE_STRING, one, None),
        ("email", F.TYPE_STRING, one, "optional"), ("amount", F.TYPE_DOUBLE, one, None),
        ("tax", F.TYPE_FLOAT, one, None), ("items", F.TYPE_INT32, one, None),
        ("paid", F.TYPE_BOOL, one, None),
        ("placed", F.TYPE_MESSAGE, one, ts), ("shipped", F.TYPE_MESSAGE, one, ts),
        ("due", F.TYPE_INT32, one, None), ("price_cents", F.TYPE_INT64, one, None),
        ("status", F.TYPE_ENUM, one, ".bench.shop.Status"), ("channel", F.TYPE_STRING, one, None),
        ("coupon", F.TYPE_STRING, one, "optional"),
        ("address", F.TYPE_MESSAGE, one, ".bench.shop.Order.Address"),
        ("lines", F.TYPE_MESSAGE, many, ".bench.shop.Order.Line"), ("tags", F.TYPE_STRING, many, None),
        ("attributes", F.TYPE_MESSAGE, many, ".bench.shop.Order.AttributesEntry"),
        ("score", F.TYPE_DOUBLE, one, "optional"), ("version", F.TYPE_INT32, one, None),
    ]
    for number, (name, kind, label, type_name) in enumerate(fields, start=1):
        field = order.field.add(name=name, number=number, type=kind, label=label)
        if type_name == "optional":
            field.proto3_optional, field.oneof_index = True, len(optional)
            optional.append(order.oneof_decl.add(name=f"_{name}"))
        elif type_name:
            field.type_name = type_name
    address = order.nested_type.add(name="Address")
    for number, (name, kind) in enumerate([("street", F.TYPE_STRING), ("city", F.TYPE_STRING),
                                           ("zip", F.TYPE_INT32), ("country", F.TYPE_STRING)], start=1):
        address.field.add(name=name, number=number, type=kind, label=one)
    line = order.nested_type.add(name="Line")
    for number, (name, kind) in enumerate([("sku", F.TYPE_STRING), ("qty", F.TYPE_INT32),
                                           ("unit", F.TYPE_DOUBLE)], start=1):
        line.field.add(name=name, number=number, type=kind, label=one)
    entry = order.nested_type.add(name="AttributesEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=one)
    entry.field.add(name="value", number=2, type=F.TYPE_STRING, label=one)
    return fdp


def order_class(fdp):
    from google.protobuf import descriptor_pool, message_factory, timestamp_pb2

    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(MESSAGE))


def _order(cls, i: int):
    msg = cls(id=i, customer=f"customer-{i % 5000}", amount=i * 0.25, tax=0.2, items=i % 9, paid=i % 2 == 0,
              due=20_500 + i % 30, price_cents=i % 100_000, status=i % 3,
              channel=["web", "shop", "app"][i % 3],
              version=2, tags=["gift", "express"][: i % 3])
    if i % 4 == 0:
        msg.email = f"c{i}@example.com"
    msg.placed.FromSeconds(1_793_491_200)
    if i % 3 == 0:
        msg.shipped.FromSeconds(1_793_577_600)
    if i % 7 == 0:
        msg.coupon = "SAVE10"
    msg.address.street, msg.address.city, msg.address.country = f"{i % 300} Main Street", "Springfield", "US"
    if i % 11 == 0:
        msg.address.zip = 12345
    for k in range(i % 4):
        msg.lines.add(sku=f"sku-{(i + k) % 1000}", qty=1 + k, unit=9.99)
    if i % 2:
        msg.attributes["source"] = "bench"
    if i % 5 == 0:
        msg.score = 0.5
    return msg


def ensure_topic(bootstrap: str, registry: str, records: int, partitions: int, distinct: int
                 ) -> tuple[str, int, bytes]:
    """The topic (created and filled on first use), the schema id its records carry, and the
    descriptor set Spark's from_protobuf reads the message with."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from google.protobuf import descriptor_pb2, timestamp_pb2

    fdp = order_file()
    schema_id = SchemaRegistryClient({"url": registry}).register_schema(
        SUBJECT, Schema(base64.b64encode(fdp.SerializeToString()).decode(), "PROTOBUF"))
    topic = f"jetbench_protobuf_{records}_{partitions}_{schema_id}"
    cls = order_class(fdp)
    header = b"\x00" + schema_id.to_bytes(4, "big") + b"\x00"  # message indexes [0]
    fill_topic(bootstrap, topic, [header + _order(cls, i).SerializeToString() for i in range(distinct)],
               records, partitions)
    files = descriptor_pb2.FileDescriptorSet()
    files.file.add().MergeFromString(timestamp_pb2.DESCRIPTOR.serialized_pb)
    files.file.append(fdp)
    return topic, schema_id, files.SerializeToString()


def main() -> int:
    args = arguments(__doc__, 5_000_000, 8)
    from pyspark.sql import functions as F
    from pyspark.sql.protobuf.functions import from_protobuf
    from pyspark_jetkafka import DefaultSource

    from jetspark.devtools.maven import SPARK_KAFKA, spark_jars_conf
    from jetspark.devtools.spark import local_session
    from jetspark.errors import JetsparkError

    bootstrap, registry = services()
    topic, schema_id, descriptors = ensure_topic(bootstrap, registry, args.records, args.partitions,
                                                 args.distinct)
    try:
        jars, which = spark_protobuf_jars(SPARK_KAFKA)
        print(f"Spark's from_protobuf: {which}", flush=True)
        with_spark = True
    except JetsparkError as e:
        print(f"Spark's from_protobuf cannot be measured here: {e}", flush=True)
        jars, with_spark = spark_jars_conf(SPARK_KAFKA), False
    spark = local_session("bench-protobuf", conf=session_conf(args, jars))
    spark.dataSource.register(DefaultSource)

    def kafka(fmt: str):
        return (spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
                .option("startingOffsets", "earliest").option("endingOffsets", "latest"))

    def protobuf_reader():
        return (kafka("jetkafka").option("value.format", "protobuf").option("schemaRegistry.url", registry)
                .option("value.subject", SUBJECT).load())

    def spark_protobuf():
        payload = F.expr("substring(value, 7, length(value) - 6)")
        return from_protobuf(payload, MESSAGE, binaryDescriptorSet=descriptors).alias("v")

    contenders = {
        "spark": lambda: kafka("kafka").load().select(spark_protobuf()).select("v.*").write,
        "jetspark": lambda: protobuf_reader().select("value.*").write,
        "bytes": lambda: kafka("jetkafka").load().select("value").write,
    }
    check = protobuf_reader()
    bad = check.where("valueError IS NOT NULL").count()
    assert bad == 0, f"{bad} records did not decode"
    if with_spark:  # the same values as Spark's from_protobuf, on a sample of the topic
        ours = check.where("offset < 500").select("partition", "offset", "value.*").collect()
        theirs = (kafka("kafka").load().where("offset < 500").select("partition", "offset", spark_protobuf())
                  .select("partition", "offset", "v.*").collect())
        same_sample(ours, theirs, "from_protobuf")
    else:
        del contenders["spark"]
    if args.handoff:
        contenders["handoff"] = handoff(spark, check, args.records, args.partitions)
    try:
        run_and_report("protobuf", contenders, args.records, args.repeat, "kafka+from_protobuf",
                       {"partitions": args.partitions, "distinct": args.distinct, "schema_fields": 20,
                        "schema_id": schema_id, "arrow_checks": args.arrow_checks})
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
