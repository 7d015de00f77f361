"""bot.backfill.store."""
