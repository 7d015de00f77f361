"""bot.backfill.service."""
