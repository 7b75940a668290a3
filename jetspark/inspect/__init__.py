"""``jetspark inspect``: a streaming query's checkpoint and the services it talks to, read-only.

:mod:`.checkpoint` reads Spark's offset and commit logs into a typed model; :mod:`.services`
asks Kafka, RabbitMQ, PostgreSQL and the queue's WAL for live figures; :mod:`.report` puts both
into a :class:`Report` (table, JSON, plot); :mod:`.plot` draws the watermarks.
"""

from jetspark.inspect.report import Report, inspect

__all__ = ["Report", "inspect"]
