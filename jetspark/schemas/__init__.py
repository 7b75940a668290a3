"""Typed records from a Schema Registry: Confluent's wire format, the registry's REST API,
subject names and schema types (docs/design.md, "Schema Registry formats")."""
