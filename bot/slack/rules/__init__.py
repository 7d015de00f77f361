"""bot.slack.rules."""
