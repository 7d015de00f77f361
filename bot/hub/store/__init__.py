"""bot.hub.store."""
