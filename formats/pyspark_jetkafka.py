"""Auto-registration of ``format("jetkafka")`` (PySpark imports ``pyspark_*`` modules).

One format name for both directions, as Spark's own ``kafka``: reading is
:class:`jetspark.datasources.kafka.source.KafkaDataSource`, writing comes from
:class:`jetspark.sinks.kafka.writer.KafkaSinkMixin`, imported when a query writes: Spark's
Python processes that only read (the source's planner on the driver, for one) unpickle this
class without the sink's modules.
"""

from pyspark.sql.types import StructType

from jetspark.datasources.kafka.source import KafkaDataSource


class DefaultSource(KafkaDataSource):
    """``jetkafka``: the replayable Kafka source and the transactional Kafka sink."""

    def writer(self, schema: StructType, overwrite: bool):
        from jetspark.sinks.kafka.writer import KafkaSinkMixin

        return KafkaSinkMixin.writer(self, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool):
        from jetspark.sinks.kafka.writer import KafkaSinkMixin

        return KafkaSinkMixin.streamWriter(self, schema, overwrite)


__all__ = ["DefaultSource"]
