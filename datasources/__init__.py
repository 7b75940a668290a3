"""jetspark.datasources."""


def __getattr__(name: str):
    # Lazy, so importing one source does not import the others (and pyspark) eagerly.
    if name == "read_kafka_stream":
        from jetspark.datasources.kafka.stream import read_kafka_stream

        return read_kafka_stream
    raise AttributeError(name)
