"""bot.lineage.rules."""
