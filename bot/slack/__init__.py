"""bot.slack."""
