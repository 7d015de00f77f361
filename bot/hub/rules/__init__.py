"""bot.hub.rules."""
