"""jetspark.datasources: jetkafka (:mod:`.kafka`) and jetrabbitmq (:mod:`.rabbitmq`), and what
both share (watermarks, their options, the stream helpers)."""


def __getattr__(name: str):
    # Lazy, so importing one source does not import the others (and pyspark) eagerly.
    if name == "read_kafka_stream":
        from jetspark.datasources.kafka.stream import read_kafka_stream

        return read_kafka_stream
    if name == "read_rabbitmq_stream":
        from jetspark.datasources.rabbitmq.stream import read_rabbitmq_stream

        return read_rabbitmq_stream
    raise AttributeError(name)
