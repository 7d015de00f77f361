"""bot.hub.messages."""
