"""Auto-registration hook of ``format("jetjdbc")`` (PySpark loads ``pyspark_*`` modules)."""

from jetspark.sinks.jdbc.writer import JdbcDataSource as DefaultSource

__all__ = ["DefaultSource"]
