"""bot.incidents.service."""
