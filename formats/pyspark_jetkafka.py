"""Auto-registration of ``format("jetkafka")`` (PySpark imports ``pyspark_*`` modules).

One format name for both directions, as Spark's own ``kafka``: reading is
:class:`jetspark.datasources.kafka.source.KafkaDataSource`, writing comes from
:class:`jetspark.sinks.kafka.writer.KafkaSinkMixin`.
"""

from jetspark.datasources.kafka.source import KafkaDataSource
from jetspark.sinks.kafka.writer import KafkaSinkMixin


class DefaultSource(KafkaSinkMixin, KafkaDataSource):
    """``jetkafka``: the replayable Kafka source and the transactional Kafka sink."""


__all__ = ["DefaultSource"]
