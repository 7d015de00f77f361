"""Running approved backfills: the Executor protocol (base), the runner and its backends."""
