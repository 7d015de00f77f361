"""bot.events.store."""
