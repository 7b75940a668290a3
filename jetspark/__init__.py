"""jetspark: Hazelcast Jet's stream-processing ideas on Spark Structured Streaming.

Subpackages: ``jetspark.datasources`` (jetkafka, jetrabbitmq, watermarks),
``jetspark.sinks`` (jdbc, kafka), ``jetspark.windowing`` (frame windowing), ``jetspark.inspect``;
``jetspark.devtools`` is development tooling (local services, the demo, the CLI), not the library.
"""

from jetspark.errors import JetsparkError, OptionError

__all__ = ["JetsparkError", "OptionError", "__version__"]
__version__ = "0.1.0"
