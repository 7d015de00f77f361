"""bot.events."""
