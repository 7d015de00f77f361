"""bot.home."""
