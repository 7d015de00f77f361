"""standins.sinks."""
