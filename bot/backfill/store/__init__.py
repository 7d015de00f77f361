"""Backfill requests, their steps and the runner's bookkeeping, in the caller's transaction."""
