"""jetspark.windowing: frame windowing (aggregate operations, sliding/tumbling/session)."""
