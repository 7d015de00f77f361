"""bot.backfill.messages."""
