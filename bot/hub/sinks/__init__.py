"""bot.hub.sinks."""
