"""bot.events.rules."""
