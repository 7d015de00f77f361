"""bot.hub.service."""
