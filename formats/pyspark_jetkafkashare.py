"""Auto-registration of ``format("jetkafkashare")`` (PySpark imports ``pyspark_*`` modules)."""

from jetspark.datasources.kafkashare.source import KafkaShareDataSource as DefaultSource

__all__ = ["DefaultSource"]
