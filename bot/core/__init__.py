"""What every capability builds on and nothing of the bot's own: the database (engines, the
tables' base, the audit log, after-commit hooks), the background loop, logs, the metrics
registry, HTTP retry and paging for API clients, how URLs are shown, and the shared value
objects (`model`: DagRef, Interval, …). Nothing here imports a capability."""
