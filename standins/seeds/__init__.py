"""standins.seeds."""
