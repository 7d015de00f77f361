"""bot.incidents."""
