"""standins.slack."""
