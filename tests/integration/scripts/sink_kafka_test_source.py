"""A DataSource that reaches the Kafka sink the way ``jetkafka`` does: with KafkaSinkMixin."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from jetspark.sinks.kafka.writer import KafkaSinkMixin


class KafkaSinkTestSource(KafkaSinkMixin, DataSource):
    @classmethod
    def name(cls) -> str:
        return "jetkafka_sink_test"
