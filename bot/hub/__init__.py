"""bot.hub."""
