"""jetrabbitmq, the source: an acknowledging queue read exactly once through a write-ahead log."""
