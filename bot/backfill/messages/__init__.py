"""Every word and Block Kit message of a backfill."""
