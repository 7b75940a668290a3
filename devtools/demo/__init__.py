"""The demo pipeline: Kafka → sliding windows → PostgreSQL on local services, with its report."""
