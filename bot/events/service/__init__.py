"""bot.events.service."""
