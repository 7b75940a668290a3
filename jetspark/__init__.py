"""jetspark: Hazelcast Jet's stream-processing ideas on Spark Structured Streaming.

Subpackages: ``jetspark.datasources`` (jetkafka, jetrabbitmq, watermarks),
``jetspark.sinks`` (jdbc, kafka), ``jetspark.windowing`` (frame windowing), ``jetspark.inspect``;
``jetspark.devtools`` is development tooling (local services, the demo, the CLI), not the library.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from jetspark.errors import JetsparkError, OptionError

__all__ = ["JetsparkError", "OptionError", "__version__"]

try:  # one version source: pyproject.toml's, as installed
    __version__: str = _version("jetspark")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
