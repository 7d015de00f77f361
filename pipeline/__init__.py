"""Example data pipelines the bot can plan and run backfills for."""
