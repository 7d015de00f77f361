"""bot.backfill.rules."""
