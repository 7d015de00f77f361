"""bot.sla."""
