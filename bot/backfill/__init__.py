"""bot.backfill."""
