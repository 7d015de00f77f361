"""bot.backfill.run."""
