"""Every Slack message, modal and Home view of the bot."""
