"""bot.slack.store."""
