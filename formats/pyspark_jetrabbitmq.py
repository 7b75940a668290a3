"""Auto-registration of ``format("jetrabbitmq")`` (PySpark imports ``pyspark_*`` modules)."""

from jetspark.datasources.rabbitmq.source import RabbitMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
