"""bot.ownership."""
