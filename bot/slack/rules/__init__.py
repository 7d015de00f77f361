"""Ids the bot puts on Slack surfaces, and the `/backfill` grammar."""
