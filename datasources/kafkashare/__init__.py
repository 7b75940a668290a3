"""``format("jetkafkashare")``: an exactly-once streaming source over a Kafka share group (KIP-932)."""
