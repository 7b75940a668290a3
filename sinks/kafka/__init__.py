"""jetkafka, the sink: Kafka transactions committed per task with a marker, or plain produces."""
