"""bot.slack.service."""
