"""jetspark.datasources."""
