"""bot.slack.messages."""
