"""The backfill's pure rules: states, progress, visibility, retry, status, outcomes."""
