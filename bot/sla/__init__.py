"""SLA misses: rules (lateness), service (the check, acknowledge), store, messages."""
