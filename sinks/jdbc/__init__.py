"""jetjdbc, the sink: PostgreSQL, by driver-side two-phase commit, task commits with a marker, or upserts."""
