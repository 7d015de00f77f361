"""standins.marquez."""
