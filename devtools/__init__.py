"""Development tooling, not the library: local services, the demo, the Maven helper and the CLI."""
