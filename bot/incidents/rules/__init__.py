"""bot.incidents.rules."""
