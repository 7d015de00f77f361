"""bot.incidents.messages."""
