"""jetkafka, the source: per-partition watermarks over a replayable Kafka topic."""
