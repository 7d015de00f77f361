"""bot.incidents.store."""
