"""jetspark.sinks."""
